"""Reflect (`POST .../reflect`): validate, run a `ReflectWorkflow`, answer when it finishes.

`based_on` is filled unless the caller sent `include` without `facts` (Hindsight fills it
only on request; its client leaves `include` out unless asked, and gets it anyway, which
it accepts). `trace` is filled when `include.tool_calls` is present, without tool outputs
when `include.tool_calls.output` is false.

Engram's addition: a caller that sends `request_id` (its own id for this question) can watch
the agent's steps while the answer is being written, with `GET .../reflect/{request_id}`
(the console's live view). The id names one question: reusing it is a 409.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import Field
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError, WorkflowHandle
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    ChildWorkflowError,
    WorkflowAlreadyStartedError,
)
from temporalio.service import RPCError, RPCStatusCode

from engine.errors import Conflict, InvalidInput, NotFound, OperationFailed
from engine.limits import MAX_QUERY_CHARS, MAX_RECALL_TOKENS
from engine.recall.types import Budget
from engine.reflect.answer import directives_of
from engine.reflect.payloads import Evidence, ReflectInput, ReflectOutput
from engine.store.banks import get_bank
from engine.store.memories import TagsMatch
from engine.types import FactType
from server.http import iso, json_response, parse_body, path_param, services_of
from server.openapi import ApiRoute
from server.responses import ReflectProgressResponse, ReflectResponse
from server.schemas import Request as Body
from workflows.errors import error_message
from workflows.reflect import ReflectWorkflow, reflect_workflow_id

MAX_CONTEXT_CHARS = 20_000
MAX_ANSWER_TOKENS = 100_000
REQUEST_ID_PATTERN = r"^[A-Za-z0-9_-]{8,64}$"
# The console asks for a question's steps as it sends it: a request that has not started yet
# is waited for this long (checked every START_POLL_S) before the answer is a 404.
START_WAIT_S = 5.0
START_POLL_S = 0.1
WIRE_STATUS = {
    WorkflowExecutionStatus.RUNNING: "running",
    WorkflowExecutionStatus.COMPLETED: "completed",
    WorkflowExecutionStatus.FAILED: "failed",
    WorkflowExecutionStatus.CANCELED: "cancelled",
    WorkflowExecutionStatus.TERMINATED: "failed",
    WorkflowExecutionStatus.TIMED_OUT: "failed",
}


class ToolCallsInclude(Body):
    output: bool | None = True


class ReflectInclude(Body):
    facts: dict[str, Any] | None = None
    tool_calls: ToolCallsInclude | None = None


class ReflectIn(Body):
    query: str
    budget: Budget | None = None
    context: str | None = None
    max_tokens: Annotated[int, Field(ge=1, le=MAX_ANSWER_TOKENS)] | None = None
    include: ReflectInclude | None = None
    response_schema: dict[str, Any] | None = None
    tags: list[str] | None = None
    tags_match: TagsMatch | None = None
    tag_groups: list[Any] | None = None
    apply_all_directives: bool | None = None
    fact_types: list[FactType] | None = None
    exclude_mental_models: bool | None = None
    exclude_mental_model_ids: list[str] | None = None
    reflect_search_observations_max_tokens: (
        Annotated[int, Field(ge=1, le=MAX_RECALL_TOKENS)] | None
    ) = None
    reflect_search_observations_include_entities: bool | None = None
    request_id: Annotated[str, Field(pattern=REQUEST_ID_PATTERN)] | None = None


def to_reflect_input(bank_id: str, body: ReflectIn, now: datetime) -> ReflectInput:
    """The workflow's input, with the checks pydantic cannot express as a 400 on a field."""
    query = body.query.strip()
    if not query:
        raise InvalidInput("query", "must not be empty")
    if len(query) > MAX_QUERY_CHARS:
        raise InvalidInput(
            "query", f"is longer than {MAX_QUERY_CHARS} characters (about 500 tokens)"
        )
    if body.context is not None and len(body.context) > MAX_CONTEXT_CHARS:
        raise InvalidInput("context", f"is longer than {MAX_CONTEXT_CHARS} characters")
    if body.tag_groups:
        raise InvalidInput("tag_groups", "is not supported; use tags and tags_match")
    schema = body.response_schema
    if schema is not None and schema.get("type", "object") != "object":
        raise InvalidInput("response_schema", "must describe a JSON object (type: object)")
    include = body.include
    tool_calls = include.tool_calls if include is not None else None
    return ReflectInput(
        bank_id=bank_id,
        query=query,
        now=now,
        budget=body.budget or "mid",
        context=body.context or "",
        max_tokens=body.max_tokens or 4096,
        response_schema=schema,
        tags=list(body.tags or ()),
        tags_match=body.tags_match or "any",
        fact_types=list(dict.fromkeys(body.fact_types or ())),
        exclude_mental_models=bool(body.exclude_mental_models),
        exclude_mental_model_ids=list(body.exclude_mental_model_ids or ()),
        include_trace=tool_calls is not None,
        include_tool_outputs=tool_calls is None or tool_calls.output is not False,
        observations_max_tokens=body.reflect_search_observations_max_tokens or 2048,
        apply_all_directives=bool(body.apply_all_directives),
    )


def fact_json(item: Evidence) -> dict[str, Any]:
    return {
        "id": item.id,
        "text": item.text,
        "type": item.kind,
        "context": item.context or None,
        "occurred_start": iso(item.occurred_start),
        "occurred_end": iso(item.occurred_end),
        "mentioned_at": iso(item.mentioned_at),
        "document_id": item.document_id,
        "chunk_id": item.chunk_id,
        "tags": item.tags,
        "metadata": item.metadata,
    }


def response_body(output: ReflectOutput, with_based_on: bool) -> dict[str, Any]:
    body: dict[str, Any] = {
        "text": output.text,
        "usage": {
            "input_tokens": output.usage.input_tokens,
            "output_tokens": output.usage.output_tokens,
            "total_tokens": output.usage.total_tokens,
            "cached_tokens": 0,
            "thoughts_tokens": 0,
        },
    }
    if with_based_on:
        body["based_on"] = {
            "memories": [fact_json(e) for e in output.based_on if e.kind != "mental_model"],
            "mental_models": [
                {"id": e.id, "text": e.text, "context": e.name or None}
                for e in output.based_on
                if e.kind == "mental_model"
            ],
            "directives": [
                {"id": d.id, "name": d.name, "content": d.content}
                for d in directives_of(output.directives)
            ],
        }
    if output.structured_output is not None:
        body["structured_output"] = output.structured_output
    if output.structured_output_error is not None:
        body["structured_output_error"] = output.structured_output_error
    if output.trace is not None:
        body["trace"] = output.trace
    return body


def _not_found(exc: BaseException) -> bool:
    while isinstance(exc, ActivityError | ChildWorkflowError) and exc.cause is not None:
        exc = exc.cause
    return isinstance(exc, ApplicationError) and exc.type == "NotFound"


async def reflect(request: Request) -> Response:
    bank_id = path_param(request, "bank_id")
    body = await parse_body(request, ReflectIn)
    reflect_input = to_reflect_input(bank_id, body, datetime.now(UTC))
    services = services_of(request)
    async with services.pool.acquire() as conn:
        await get_bank(conn, bank_id)
    run_id = body.request_id or str(uuid.uuid4())
    try:
        handle = await services.temporal.start_workflow(
            ReflectWorkflow.run,
            reflect_input,
            id=reflect_workflow_id(bank_id, run_id),
            task_queue=services.settings.task_queue,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
        )
    except WorkflowAlreadyStartedError as exc:
        raise Conflict(f"request_id {run_id} was already used for another question") from exc
    try:
        output = await handle.result()
    except WorkflowFailureError as exc:
        if _not_found(exc.cause):
            raise NotFound("bank", bank_id) from exc
        raise OperationFailed(run_id, f"reflect failed: {error_message(exc.cause)}") from exc
    # What the answer rests on is reinforced like what recall returns (buffered, no I/O here).
    cited = [e.id for e in output.based_on if e.kind != "mental_model"]
    if cited:
        services.access.record(bank_id, cited)
    with_based_on = body.include is None or body.include.facts is not None
    return json_response(response_body(output, with_based_on))


async def _started(handle: WorkflowHandle[Any, Any]) -> WorkflowExecutionStatus | None:
    """The workflow's status, waiting up to START_WAIT_S for one not started yet."""
    deadline = asyncio.get_running_loop().time() + START_WAIT_S
    while True:
        try:
            return (await handle.describe()).status
        except RPCError as exc:
            if exc.status != RPCStatusCode.NOT_FOUND:
                raise
            if asyncio.get_running_loop().time() >= deadline:
                raise NotFound("reflect request", handle.id.rsplit(":", 1)[-1]) from exc
        await asyncio.sleep(START_POLL_S)


async def progress(request: Request) -> Response:
    """A question's steps so far (tool calls with their input and output, model calls), what
    the agent is doing now, and whether it has finished (the answer comes with the POST)."""
    bank_id = path_param(request, "bank_id")
    request_id = path_param(request, "request_id")
    services = services_of(request)
    async with services.pool.acquire() as conn:
        await get_bank(conn, bank_id)
    handle = services.temporal.get_workflow_handle(reflect_workflow_id(bank_id, request_id))
    status = await _started(handle)
    steps: dict[str, Any] = await handle.query(ReflectWorkflow.steps)
    return json_response(
        {
            "request_id": request_id,
            "status": WIRE_STATUS.get(status, "running") if status else "running",
            "stage": steps["stage"],
            "iteration": steps["iteration"],
            "tool_calls": steps["tool_calls"],
            "llm_calls": steps["llm_calls"],
        }
    )


def routes() -> list[BaseRoute]:
    return [
        ApiRoute(
            "/v1/default/banks/{bank_id}/reflect",
            reflect,
            methods=["POST"],
            tag="reflect",
            summary="Answer a question from memory (an LLM reasons over recall)",
            body=ReflectIn,
            response=ReflectResponse,
        ),
        ApiRoute(
            "/v1/default/banks/{bank_id}/reflect/{request_id}",
            progress,
            methods=["GET"],
            tag="reflect",
            summary="The steps of a reflect question sent with request_id, while it runs",
            response=ReflectProgressResponse,
        ),
    ]
