"""Mental models (`.../mental-models`): CRUD, refresh, clear and version history.

Hindsight's wire format; Engram extensions are optional and ignored by its clients: `kind`
("model" or "report") and `questions` (a report's list) on create/update and in responses,
`version` and `schedule_id` in responses, and the history entries' extra fields.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any, Literal, TypeVar, cast

from pydantic import BaseModel, Field, StrictBool, ValidationError
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from activities.schedules import drop_schedule
from engine.errors import InvalidInput
from engine.limits import MAX_NAME_CHARS, MAX_QUERY_CHARS, MAX_RECALL_TOKENS, MAX_REPORT_QUESTIONS
from engine.mental_models.payloads import Kind
from engine.mental_models.store import (
    MentalModel,
    ModelChanges,
    NewModel,
    Version,
    check_id,
    check_max_tokens,
    check_text,
    clear_model,
    create_model,
    delete_model,
    get_model,
    list_models,
    list_versions,
    set_schedule_id,
    update_model,
)
from engine.mental_models.trigger import merge_trigger
from engine.store.banks import ensure_bank, get_bank
from engine.store.memories import TagsMatch
from server.http import (
    bool_param,
    choice_param,
    int_param,
    iso,
    json_response,
    parse_body,
    path_param,
    services_of,
    texts_param,
)
from server.lifecycle_responses import MentalModelDryRunRefreshResult
from server.mental_model_preview import dry_run_refresh
from server.mental_models import submit_refresh, sync_schedule
from server.openapi import ApiRoute
from server.schemas import Request as Body
from server.schemas import Tags

Model = TypeVar("Model", bound=BaseModel)
DETAILS = ("metadata", "content", "full")
TAGS_MATCH = ("any", "all", "any_strict", "all_strict", "exact")


# A year: the longest a refresh interval can usefully be, and far from overflowing a timedelta.
MAX_INTERVAL_S = 366 * 24 * 3600
Tokens = Annotated[int, Field(ge=1, le=MAX_RECALL_TOKENS)]


class TriggerIn(Body):
    budget: Literal["low", "mid", "high"] | None = None
    mode: Literal["full", "delta"] | None = None
    refresh_after_consolidation: StrictBool | None = None
    refresh_cron: str | None = None
    full_refresh_cron: str | None = None
    min_refresh_interval_seconds: Annotated[int, Field(ge=0, le=MAX_INTERVAL_S)] | None = None
    fact_types: list[Literal["world", "experience", "observation"]] | None = None
    exclude_mental_models: StrictBool | None = None
    exclude_mental_model_ids: list[str] | None = None
    tags_match: Literal["any", "all", "any_strict", "all_strict", "exact"] | None = None
    tag_groups: list[Any] | None = None
    include_chunks: StrictBool | None = None
    recall_max_tokens: Tokens | None = None
    recall_chunks_max_tokens: Tokens | None = None
    reflect_search_observations_max_tokens: Tokens | None = None
    reflect_search_observations_include_entities: StrictBool | None = None
    response_schema: dict[str, Any] | None = None
    keep_trace: StrictBool | None = None


Name = Annotated[str, Field(max_length=MAX_NAME_CHARS)]
# A question is a reflect query, with reflect's limit (a refresh passes it to reflect's
# workflow, whose payloads Temporal caps at 2 MB).
Question = Annotated[str, Field(max_length=MAX_QUERY_CHARS)]
Questions = Annotated[list[Question], Field(max_length=MAX_REPORT_QUESTIONS)]


class CreateIn(Body):
    id: str | None = None
    name: Name
    source_query: Question | None = None
    tags: Tags | None = None
    max_tokens: int | None = None
    trigger: TriggerIn | None = None
    kind: Literal["model", "report"] | None = None
    questions: Questions | None = None


class UpdateIn(Body):
    name: Name | None = None
    source_query: Question | None = None
    max_tokens: int | None = None
    tags: Tags | None = None
    trigger: TriggerIn | None = None
    questions: Questions | None = None


class RefreshIn(Body):
    mode: Literal["full"] | None = None


async def parse(request: Request, model: type[Model]) -> Model:
    """The body, with a validation error reported as a 400 naming the field."""
    try:
        return await parse_body(request, model)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or "body"
        raise InvalidInput(field, first["msg"]) from exc


def trigger_patch(trigger: TriggerIn | None) -> dict[str, Any]:
    return trigger.model_dump(exclude_unset=True) if trigger is not None else {}


def check_questions(questions: list[str]) -> list[str]:
    if not questions:
        raise InvalidInput("questions", "a report needs at least one question")
    for index, question in enumerate(questions):
        check_text(f"questions[{index}]", question)
    return questions


def model_json(model: MentalModel, detail: str) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": model.id,
        "bank_id": model.bank_id,
        "name": model.name,
        "source_query": model.source_query,
        "tags": model.tags,
        "max_tokens": model.max_tokens,
        "trigger": model.trigger,
        "last_refreshed_at": iso(model.last_refreshed_at),
        "last_memory_seen_at": iso(model.last_memory_seen_at),
        "last_refresh_failed_at": iso(model.last_refresh_failed_at),
        "last_full_refreshed_at": iso(model.last_refreshed_at),
        "created_at": iso(model.created_at),
        "is_knowledge_page": False,
        "is_stale": not model.content,
        "kind": model.kind,
        "questions": model.asked,
        "version": model.version,
        "schedule_id": model.schedule_id,
        "last_refresh_error": model.last_refresh_error,
    }
    if detail in ("content", "full"):
        body["content"] = model.content
        body["based_on"] = model.based_on
    if detail == "full":
        body["reflect_response"] = model.reflect_response
    return body


def version_json(version: Version, previous: Version | None) -> dict[str, Any]:
    return {
        "version": version.version,
        "content": version.content,
        "previous_content": previous.content if previous is not None else None,
        "changed_at": iso(version.refreshed_at),
        "reason": version.reason,
        "source_query": version.source_query,
        "based_on": version.based_on,
        "operation_id": version.operation_id or None,
    }


async def create(request: Request) -> Response:
    bank_id = path_param(request, "bank_id")
    body = await parse(request, CreateIn)
    kind: Kind = body.kind or "model"
    model_id = check_id(body.id) if body.id is not None else str(uuid.uuid4())
    questions: list[str] = []
    if kind == "report":
        questions = check_questions(
            body.questions or ([body.source_query] if body.source_query else [])
        )
    elif body.questions is not None:
        raise InvalidInput("questions", "only a report (kind: report) has several questions")
    source_query = body.source_query if body.source_query is not None else "\n".join(questions)
    new = NewModel(
        bank_id=bank_id,
        id=model_id,
        name=check_text("name", body.name),
        source_query=check_text("source_query", source_query),
        trigger=merge_trigger({}, trigger_patch(body.trigger)),
        tags=body.tags or [],
        max_tokens=check_max_tokens(body.max_tokens if body.max_tokens is not None else 2048),
        kind=kind,
        questions=questions,
    )
    services = services_of(request)
    async with services.pool.acquire() as conn, conn.transaction():
        await ensure_bank(conn, bank_id)
        model = await create_model(conn, new)
        schedule_id = await sync_schedule(services.temporal, model, services.settings.task_queue)
        await set_schedule_id(conn, bank_id, model_id, schedule_id)
    operation_id = await submit_refresh(services, bank_id, model_id, "created", force=False)
    return json_response({"operation_id": operation_id, "mental_model_id": model_id})


async def list_all(request: Request) -> Response:
    bank_id = path_param(request, "bank_id")
    tags = texts_param(request, "tags")
    tags_match = cast(TagsMatch, choice_param(request, "tags_match", TAGS_MATCH) or "any")
    detail = choice_param(request, "detail", DETAILS) or "metadata"
    kind = cast(Kind | None, choice_param(request, "kind", ("model", "report")))
    limit = int_param(request, "limit", 100, low=1)
    offset = int_param(request, "offset", 0, high=10**9)
    bool_param(request, "exclude_knowledge_pages")  # no knowledge pages: checked, no effect
    services = services_of(request)
    async with services.pool.acquire() as conn:
        await get_bank(conn, bank_id)
        models, total = await list_models(conn, bank_id, tags, tags_match, limit, offset, kind)
    return json_response(
        {
            "items": [model_json(m, detail) for m in models],
            "total": total,
            "limit": limit,
            "offset": offset,
        }
    )


async def get_one(request: Request) -> Response:
    detail = choice_param(request, "detail", DETAILS) or "full"
    services = services_of(request)
    async with services.pool.acquire() as conn:
        model = await get_model(conn, path_param(request, "bank_id"), path_param(request, "id"))
    return json_response(model_json(model, detail))


async def update(request: Request) -> Response:
    bank_id, model_id = path_param(request, "bank_id"), path_param(request, "id")
    body = await parse(request, UpdateIn)
    services = services_of(request)
    async with services.pool.acquire() as conn, conn.transaction():
        current = await get_model(conn, bank_id, model_id)
        questions = body.questions
        if questions is not None:
            if current.kind != "report":
                raise InvalidInput(
                    "questions", "only a report (kind: report) has several questions"
                )
            check_questions(questions)
        source_query = body.source_query
        if source_query is not None:
            check_text("source_query", source_query)
            if (
                current.kind == "report"
                and questions is None
                and current.questions == [current.source_query]
            ):
                questions = [source_query]
        elif questions is not None:
            source_query = "\n".join(questions)
        changes = ModelChanges(
            name=check_text("name", body.name) if body.name is not None else None,
            source_query=source_query,
            questions=questions,
            tags=body.tags,
            max_tokens=check_max_tokens(body.max_tokens) if body.max_tokens is not None else None,
            trigger=(
                merge_trigger(current.trigger, trigger_patch(body.trigger))
                if body.trigger is not None
                else None
            ),
        )
        model = await update_model(conn, bank_id, model_id, changes)
        if changes.trigger is not None:
            schedule_id = await sync_schedule(
                services.temporal, model, services.settings.task_queue
            )
            await set_schedule_id(conn, bank_id, model_id, schedule_id)
            model = await get_model(conn, bank_id, model_id)
    return json_response(model_json(model, "full"))


async def delete(request: Request) -> Response:
    bank_id, model_id = path_param(request, "bank_id"), path_param(request, "id")
    services = services_of(request)
    async with services.pool.acquire() as conn, conn.transaction():
        model = await delete_model(conn, bank_id, model_id)
        if model.schedule_id is not None:
            await drop_schedule(services.temporal, model.schedule_id)
    return json_response({"success": True, "deleted": model_id})


async def refresh(request: Request) -> Response:
    bank_id, model_id = path_param(request, "bank_id"), path_param(request, "id")
    body = await parse(request, RefreshIn)
    services = services_of(request)
    async with services.pool.acquire() as conn:
        await get_model(conn, bank_id, model_id)
    operation_id = await submit_refresh(
        services, bank_id, model_id, "api", force=body.mode == "full"
    )
    return json_response({"operation_id": operation_id, "status": "pending"})


async def clear(request: Request) -> Response:
    services = services_of(request)
    async with services.pool.acquire() as conn:
        model = await clear_model(conn, path_param(request, "bank_id"), path_param(request, "id"))
    return json_response(model_json(model, "full"))


async def history(request: Request) -> Response:
    services = services_of(request)
    async with services.pool.acquire() as conn:
        versions = await list_versions(
            conn, path_param(request, "bank_id"), path_param(request, "id")
        )
    older = [*versions[1:], None]
    return json_response([version_json(v, p) for v, p in zip(versions, older, strict=True)])


async def dry_run(request: Request) -> Response:
    bank_id, model_id = path_param(request, "bank_id"), path_param(request, "id")
    services = services_of(request)
    async with services.pool.acquire() as conn:
        await get_bank(conn, bank_id)
    return json_response(await dry_run_refresh(services, bank_id, model_id))


def routes() -> list[Route]:
    base = "/v1/default/banks/{bank_id}/mental-models"
    return [
        ApiRoute(
            base,
            create,
            methods=["POST"],
            tag="mental-models",
            summary="Create a mental model (its first refresh starts)",
            body=CreateIn,
        ),
        ApiRoute(
            base, list_all, methods=["GET"], tag="mental-models", summary="List mental models"
        ),
        ApiRoute(
            base + "/{id}",
            get_one,
            methods=["GET"],
            tag="mental-models",
            summary="One mental model",
        ),
        ApiRoute(
            base + "/{id}",
            update,
            methods=["PATCH"],
            tag="mental-models",
            summary="Change a mental model (null leaves a field unchanged)",
            body=UpdateIn,
        ),
        ApiRoute(
            base + "/{id}",
            delete,
            methods=["DELETE"],
            tag="mental-models",
            summary="Delete a mental model",
        ),
        ApiRoute(
            base + "/{id}/refresh",
            refresh,
            methods=["POST"],
            tag="mental-models",
            summary="Refresh a mental model now",
            body=RefreshIn,
        ),
        ApiRoute(
            base + "/{id}/clear",
            clear,
            methods=["POST"],
            tag="mental-models",
            summary="Empty a mental model's content",
        ),
        ApiRoute(
            base + "/{id}/history",
            history,
            methods=["GET"],
            tag="mental-models",
            summary="A mental model's earlier versions, newest first",
        ),
        ApiRoute(
            base + "/{id}/dry-run-refresh",
            dry_run,
            methods=["POST"],
            tag="mental-models",
            summary="Preview a refresh: the content it would write, and its diff (nothing stored)",
            response=MentalModelDryRunRefreshResult,
        ),
    ]
