"""Observations: clear them, trigger and watch consolidation, read an observation's evidence
and history (also merged into `GET .../memories/{id}` for observations)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from engine.consolidation.observations import (
    HistoryItem,
    clear_fact_observations,
    clear_observations,
    consolidation_status,
    observation_detail,
    observation_history,
)
from engine.consolidation.payloads import ConsolidationRequest
from engine.db import Connection
from engine.errors import InvalidInput
from engine.lifecycle.versions import FactVersion, fact_history
from engine.store.banks import get_bank
from server.http import iso, json_response, path_param, services_of
from server.lifecycle_responses import ClearMemoryObservationsResponse, MemoryHistoryResponse
from server.openapi import ApiRoute
from server.services import Services
from workflows.consolidation import ConsolidationWorkflow, consolidation_workflow_id


def history_json(item: HistoryItem) -> dict[str, Any]:
    return {
        "version": item.version,
        "change": item.change,
        "previous_text": item.previous_text,
        "text": item.new_text,
        "reason": item.reason,
        "fact_ids": item.fact_ids,
        "related_id": item.related_id,
        "changed_at": iso(item.changed_at),
    }


async def observation_fields(conn: Connection, bank_id: str, memory_id: str) -> dict[str, Any]:
    """What `GET .../memories/{id}` adds for an observation: its evidence (the supporting
    facts with their quotes), its history, and its freshness."""
    detail = await observation_detail(conn, bank_id, memory_id, datetime.now(UTC))
    return {
        "source_memory_ids": [e.fact_id for e in detail.evidence if e.stance == "supports"],
        "evidence": [
            {
                "memory_id": e.fact_id,
                "text": e.text,
                "quote": e.quote,
                "stance": e.stance,
                "evidence_at": iso(e.evidence_at),
                "added_at": iso(e.added_at),
            }
            for e in detail.evidence
        ],
        "history": [history_json(h) for h in detail.history],
        "version": detail.version,
        "origin": detail.origin,
        "trend": detail.trend,  # as of the newest fact consolidated in the bank
        "trend_now": detail.current_trend,
        "first_evidence_at": iso(detail.first_evidence_at),
        "last_evidence_at": iso(detail.last_evidence_at),
    }


async def clear_route(request: Request) -> Response:
    bank_id = path_param(request, "bank_id")
    async with services_of(request).pool.acquire() as conn:
        await get_bank(conn, bank_id)
        count = await clear_observations(conn, bank_id)
    return json_response(
        {
            "success": True,
            "message": "observations cleared; the next consolidation rebuilds them",
            "deleted_count": count,
        }
    )


def version_json(item: FactVersion) -> dict[str, Any]:
    """A fact's change (engine/lifecycle/versions.py) in the shape of an observation's."""
    return {
        "version": item.version,
        "change": item.change,
        "previous_text": item.previous_text,
        "text": item.new_text,
        "reason": item.reason,
        "fact_ids": [],
        "related_id": item.related_id,
        "changed_at": iso(item.changed_at),
        "previous": item.previous,
    }


async def history_route(request: Request) -> Response:
    """An observation's history, or a fact's: corrections, supersession (both directions,
    `related_id` the other fact), archive and restore, feedback; newest first."""
    bank_id = path_param(request, "bank_id")
    memory_id = path_param(request, "memory_id")
    async with services_of(request).pool.acquire() as conn:
        await get_bank(conn, bank_id)
        items = await observation_history(conn, bank_id, memory_id)
        versions = await fact_history(conn, bank_id, memory_id) if not items else []
    if versions:
        return json_response([version_json(v) for v in versions])
    return json_response([history_json(h) for h in items])


async def clear_memory_route(request: Request) -> Response:
    """Hindsight's clear_memory_observations: the observations built from one fact go, the
    fact stays and is consolidated again (a run is started when the bank consolidates)."""
    bank_id = path_param(request, "bank_id")
    services = services_of(request)
    async with services.pool.acquire() as conn:
        bank = await get_bank(conn, bank_id)
        removed = await clear_fact_observations(conn, bank_id, path_param(request, "memory_id"))
    services.recall.token_cache.discard(removed)
    if removed and bank.config.enable_observations:
        await start_consolidation(services, bank_id)
    return json_response({"deleted_count": len(removed)})


async def consolidate_route(request: Request) -> Response:
    """Start the bank's consolidation, or tell the running one to make another pass."""
    bank_id = path_param(request, "bank_id")
    services = services_of(request)
    async with services.pool.acquire() as conn:
        bank = await get_bank(conn, bank_id)
    if not bank.config.enable_observations:
        raise InvalidInput("enable_observations", "is off for this bank; turn it on first")
    workflow_id = await start_consolidation(services, bank_id)
    return json_response({"success": True, "bank_id": bank_id, "workflow_id": workflow_id})


async def start_consolidation(services: Services, bank_id: str) -> str:
    """Start the bank's consolidation workflow, or signal the running one for another pass."""
    workflow_id = consolidation_workflow_id(bank_id)
    await services.temporal.start_workflow(
        ConsolidationWorkflow.run,
        ConsolidationRequest(bank_id, "api"),
        id=workflow_id,
        task_queue=services.settings.task_queue,
        start_signal="more",
    )
    return workflow_id


async def status_route(request: Request) -> Response:
    """The backlog, and the latest consolidation's operation with its progress."""
    bank_id = path_param(request, "bank_id")
    async with services_of(request).pool.acquire() as conn:
        await get_bank(conn, bank_id)
        status = await consolidation_status(conn, bank_id)
    return json_response(
        {
            "bank_id": bank_id,
            "pending_facts": status.pending,
            "observations": status.observations,
            "facts_consolidated": status.facts_consolidated,
            "last_consolidated_at": iso(status.last_consolidated_at),
            "operation_id": status.operation_id,
            "operation_status": status.operation_status,
            "progress": status.progress,
        }
    )


def routes() -> list[Route]:
    base = "/v1/default/banks/{bank_id}"
    return [
        ApiRoute(
            base + "/observations",
            clear_route,
            methods=["DELETE"],
            tag="observations",
            summary="Delete all observations (consolidation rebuilds them)",
        ),
        ApiRoute(
            base + "/consolidate",
            consolidate_route,
            methods=["POST"],
            tag="observations",
            summary="Consolidate new facts into observations now",
        ),
        ApiRoute(
            base + "/consolidation",
            status_route,
            methods=["GET"],
            tag="observations",
            summary="Consolidation state and backlog",
        ),
        ApiRoute(
            base + "/memories/{memory_id}/observations",
            clear_memory_route,
            methods=["DELETE"],
            tag="observations",
            summary="Delete the observations built from one memory; it is consolidated again",
            response=ClearMemoryObservationsResponse,
        ),
        ApiRoute(
            base + "/memories/{memory_id}/history",
            history_route,
            methods=["GET"],
            tag="observations",
            summary="A memory's history: an observation's changes, or a fact's corrections",
            response=MemoryHistoryResponse,
        ),
    ]
