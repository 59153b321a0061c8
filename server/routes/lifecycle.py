"""The memory lifecycle over HTTP (docs/lifecycle.md): correct a fact (Hindsight's PATCH),
forget one or by filter (with a dry run), feedback. Thin over engine/lifecycle/ so the MCP
tools can call the same functions."""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from engine.errors import InvalidInput
from engine.lifecycle.correction import (
    UNSET,
    Correction,
    Reembedding,
    correct_memory,
    record_feedback,
)
from engine.lifecycle.erasure import ForgetFilter, ForgetResult, forget
from engine.lifecycle.payloads import LifecycleRequest
from engine.recall.vectors import encode_token_vectors
from engine.store.banks import get_bank
from engine.store.memories import get_memory
from server.http import json_response, parse_body, path_param, services_of
from server.lifecycle import after_erasure
from server.lifecycle_responses import (
    FeedbackResponse,
    ForgetResponse,
    LifecycleRunResponse,
    UpdatedMemoryResponse,
)
from server.openapi import ApiRoute
from server.retain import parse_timestamp
from server.routes.memories import STATES_FROM_WIRE, memory_item
from server.schemas import Request as Body
from server.services import Services
from workflows.lifecycle import LifecycleWorkflow, lifecycle_workflow_id


class UpdateMemoryIn(Body):
    """Hindsight's UpdateMemoryRequest (+ tags): '' clears a date or the context."""

    text: str | None = None
    context: str | None = None
    occurred_start: str | None = None
    occurred_end: str | None = None
    fact_type: str | None = None
    tags: list[str] | None = None
    state: str | None = None
    reason: str | None = None
    entities: list[str] | None = None
    # Hindsight's: resolve names as retain does (true), or take them literally (false).
    resolve_entities: bool = True


class ForgetIn(Body):
    memory_ids: list[str] | None = None
    entity: str | None = None
    tags: list[str] | None = None
    document_id: str | None = None
    text: str | None = None
    start_date: str | None = None
    end_date: str | None = None
    dry_run: bool = False


class DeleteMemoryQuery(BaseModel):
    dry_run: bool | None = None


class LifecycleRunIn(Body):
    now: str | None = None  # the time decay is measured to (a simulation's "now")


class FeedbackIn(Body):
    signal: Literal["useful", "not_useful", "wrong"]
    reason: str = ""


def _date(raw: str | None, field: str) -> datetime | None:
    if raw is None:
        return None
    if raw in {"", "unset"}:
        raise InvalidInput(field, "must be an ISO-8601 date or datetime")
    return parse_timestamp(raw, field, datetime.now().astimezone())


def _optional_date(raw: str | None, field: str) -> Any:
    """Omitted: leave (the correction's unset marker); '': clear; else the instant."""
    if raw is None:
        return UNSET
    return None if raw == "" else _date(raw, field)


async def _reembed(services: Services, text: str) -> Reembedding:
    loop = asyncio.get_running_loop()
    vectors, tokens = await loop.run_in_executor(
        services.cpu, services.embedder.embed_with_tokens, [text]
    )
    return Reembedding(vectors[0], encode_token_vectors(tokens[0]))


async def update_memory_route(request: Request) -> Response:
    bank_id = path_param(request, "bank_id")
    memory_id = path_param(request, "memory_id")
    body = await parse_body(request, UpdateMemoryIn)
    state = None
    if body.state is not None:
        if body.state not in STATES_FROM_WIRE:
            raise InvalidInput("state", f"must be one of {', '.join(STATES_FROM_WIRE)}")
        state = STATES_FROM_WIRE[body.state]
    change = Correction(
        text=body.text,
        context=body.context,
        fact_type=body.fact_type,
        tags=body.tags,
        state=state,
        reason=body.reason or "",
        entities=body.entities,
        resolve_entities=body.resolve_entities,
        occurred_start=_optional_date(body.occurred_start, "occurred_start"),
        occurred_end=_optional_date(body.occurred_end, "occurred_end"),
    ).validated()
    services = services_of(request)
    reembedded = await _reembed(services, change.text.strip()) if change.text else None
    async with services.pool.acquire() as conn:
        await get_bank(conn, bank_id)
        await correct_memory(conn, bank_id, memory_id, change, reembedded)
        memory = await get_memory(conn, bank_id, memory_id)
    services.recall.token_cache.discard([memory_id])
    return json_response({**memory_item(memory), "bank_id": bank_id, "entities": memory.entities})


def forget_json(result: ForgetResult) -> dict[str, Any]:
    return {
        "success": True,
        "dry_run": result.dry_run,
        "deleted_count": len(result.facts),
        "memories": [
            {
                "id": f.id,
                "text": f.text,
                "fact_type": f.fact_type,
                "document_id": f.document_id,
                "collateral": f.collateral,
            }
            for f in result.facts
        ],
        "observations_retracted": result.observations_retracted,
        "entities_removed": result.entities_removed,
        "documents_deleted": result.documents_deleted,
        "chunks_deleted": result.chunks_deleted,
        "chunks_redacted": result.chunks_redacted,
        "mental_models_affected": result.mental_models_affected,
    }


async def _forget(request: Request, where: ForgetFilter, dry_run: bool) -> ForgetResult:
    bank_id = path_param(request, "bank_id")
    services = services_of(request)
    async with services.pool.acquire() as conn:
        bank = await get_bank(conn, bank_id)
        result = await forget(conn, bank_id, where, dry_run=dry_run)
    if not dry_run:
        services.recall.token_cache.discard(result.ids + result.observations_retracted)
        await after_erasure(services, bank, result)
    return result


async def forget_route(request: Request) -> Response:
    body = await parse_body(request, ForgetIn)
    where = ForgetFilter(
        memory_ids=tuple(body.memory_ids or ()),
        entity=body.entity or None,
        tags=tuple(body.tags or ()),
        document_id=body.document_id or None,
        text=body.text or None,
        start=_date(body.start_date, "start_date"),
        end=_date(body.end_date, "end_date"),
    )
    return json_response(forget_json(await _forget(request, where, body.dry_run)))


async def delete_memory_route(request: Request) -> Response:
    memory_id = path_param(request, "memory_id")
    dry_run = request.query_params.get("dry_run", "").lower() in ("1", "true", "yes")
    result = await _forget(request, ForgetFilter(memory_ids=(memory_id,)), dry_run)
    return json_response(forget_json(result))


async def feedback_route(request: Request) -> Response:
    bank_id = path_param(request, "bank_id")
    memory_id = path_param(request, "memory_id")
    body = await parse_body(request, FeedbackIn)
    async with services_of(request).pool.acquire() as conn:
        bank = await get_bank(conn, bank_id)
        step = bank.config.lifecycle_policy.feedback_step
        result = await record_feedback(conn, bank_id, memory_id, body.signal, body.reason, step)
    return json_response(
        {
            "success": True,
            "memory_id": memory_id,
            "signal": body.signal,
            "importance_before": result.importance_before,
            "importance": result.importance_after,
            "needs_correction": result.needs_correction,
        }
    )


async def run_lifecycle_route(request: Request) -> Response:
    """Run the bank's lifecycle now (what its daily schedule does) and wait for the counts."""
    bank_id = path_param(request, "bank_id")
    body = await parse_body(request, LifecycleRunIn)
    services = services_of(request)
    async with services.pool.acquire() as conn:
        await get_bank(conn, bank_id)
    counts = await services.temporal.execute_workflow(
        LifecycleWorkflow.run,
        LifecycleRequest(bank_id, "api", _date(body.now, "now")),
        id=f"{lifecycle_workflow_id(bank_id)}:{uuid.uuid4()}",
        task_queue=services.settings.task_queue,
    )
    return json_response({"success": True, "bank_id": bank_id, "counts": counts})


def routes() -> list[Route]:
    base = "/v1/default/banks/{bank_id}"
    return [
        ApiRoute(
            base + "/memories/{memory_id}",
            update_memory_route,
            methods=["PATCH"],
            tag="lifecycle",
            summary="Correct a memory (text, dates, type, tags, state); kept in its history",
            body=UpdateMemoryIn,
            response=UpdatedMemoryResponse,
        ),
        ApiRoute(
            base + "/memories/{memory_id}",
            delete_memory_route,
            methods=["DELETE"],
            tag="lifecycle",
            summary="Forget one memory (dry_run=true lists what would go)",
            query=DeleteMemoryQuery,
            response=ForgetResponse,
        ),
        ApiRoute(
            base + "/memories/{memory_id}/feedback",
            feedback_route,
            methods=["POST"],
            tag="lifecycle",
            summary="Feedback on a memory: useful, not_useful or wrong",
            body=FeedbackIn,
            response=FeedbackResponse,
        ),
        ApiRoute(
            base + "/forget",
            forget_route,
            methods=["POST"],
            tag="lifecycle",
            summary="Forget memories by ids or filter, with a dry run",
            body=ForgetIn,
            response=ForgetResponse,
        ),
        ApiRoute(
            base + "/lifecycle/run",
            run_lifecycle_route,
            methods=["POST"],
            tag="lifecycle",
            summary="Run the bank's lifecycle (decay, archive, sweep) now and wait for it",
            body=LifecycleRunIn,
            response=LifecycleRunResponse,
        ),
    ]
