"""Directives (`.../directives`): rules reflect follows, highest priority first. Untagged
active directives apply to every reflect (tag-scoped ones are stored and listed, and do not
yet take part: reflect does not pass its tags to the context step)."""

from __future__ import annotations

import uuid
from typing import Annotated, Any, cast

from pydantic import BaseModel, Field
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from engine.errors import InvalidInput
from engine.limits import MAX_INT32, MIN_INT32
from engine.store.banks import ensure_bank, get_bank
from engine.store.directives import (
    Directive,
    DirectiveChanges,
    create_directive,
    delete_directive,
    get_directive,
    list_directives,
    update_directive,
)
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
from server.openapi import ApiRoute
from server.queries import Limit, Offset
from server.responses import DeleteResponse, DirectiveListResponse, DirectiveResponse
from server.schemas import Request as Body

MAX_CONTENT = 10_000
Name = Annotated[str, Field(min_length=1, max_length=200)]
Content = Annotated[str, Field(min_length=1, max_length=MAX_CONTENT)]
Priority = Annotated[int, Field(ge=MIN_INT32, le=MAX_INT32)]
TAGS_MATCH = ("any", "all", "any_strict", "all_strict", "exact")


class CreateDirectiveIn(Body):
    name: Name
    content: Content
    priority: Priority = 0
    is_active: bool = True
    tags: list[str] | None = None


class UpdateDirectiveIn(Body):
    name: Name | None = None
    content: Content | None = None
    priority: Priority | None = None
    is_active: bool | None = None
    tags: list[str] | None = None


class DirectivesQuery(BaseModel):
    tags: list[str] | None = None
    tags_match: TagsMatch | None = None
    active_only: bool | None = None
    limit: Limit | None = None
    offset: Offset | None = None


def directive_json(d: Directive) -> dict[str, Any]:
    return {
        "id": d.id,
        "bank_id": d.bank_id,
        "name": d.name,
        "content": d.content,
        "priority": d.priority,
        "is_active": d.is_active,
        "tags": d.tags,
        "created_at": iso(d.created_at),
        "updated_at": iso(d.updated_at),
    }


def _text(field: str, value: str) -> str:
    if not value.strip():
        raise InvalidInput(field, "must not be empty")
    return value.strip()


async def create(request: Request) -> Response:
    bank_id = path_param(request, "bank_id")
    body = await parse_body(request, CreateDirectiveIn)
    async with services_of(request).pool.acquire() as conn, conn.transaction():
        await ensure_bank(conn, bank_id)
        directive = await create_directive(
            conn,
            bank_id,
            str(uuid.uuid4()),
            _text("name", body.name),
            _text("content", body.content),
            body.priority,
            body.is_active,
            list(dict.fromkeys(body.tags or ())),
        )
    return json_response(directive_json(directive))


async def list_all(request: Request) -> Response:
    bank_id = path_param(request, "bank_id")
    tags = texts_param(request, "tags")
    tags_match = cast(TagsMatch, choice_param(request, "tags_match", TAGS_MATCH) or "any")
    active_only = bool_param(request, "active_only", False)
    limit = int_param(request, "limit", 100, low=1)
    offset = int_param(request, "offset", 0, high=10**9)
    async with services_of(request).pool.acquire() as conn:
        await get_bank(conn, bank_id)
        items, total = await list_directives(
            conn, bank_id, tags, tags_match, active_only, limit, offset
        )
    return json_response(
        {
            "items": [directive_json(d) for d in items],
            "total": total,
            "limit": limit,
            "offset": offset,
        }
    )


async def get_one(request: Request) -> Response:
    async with services_of(request).pool.acquire() as conn:
        directive = await get_directive(
            conn, path_param(request, "bank_id"), path_param(request, "directive_id")
        )
    return json_response(directive_json(directive))


async def update(request: Request) -> Response:
    body = await parse_body(request, UpdateDirectiveIn)
    changes = DirectiveChanges(
        name=_text("name", body.name) if body.name is not None else None,
        content=_text("content", body.content) if body.content is not None else None,
        priority=body.priority,
        is_active=body.is_active,
        tags=list(dict.fromkeys(body.tags)) if body.tags is not None else None,
    )
    async with services_of(request).pool.acquire() as conn:
        directive = await update_directive(
            conn, path_param(request, "bank_id"), path_param(request, "directive_id"), changes
        )
    return json_response(directive_json(directive))


async def delete(request: Request) -> Response:
    directive_id = path_param(request, "directive_id")
    async with services_of(request).pool.acquire() as conn:
        await delete_directive(conn, path_param(request, "bank_id"), directive_id)
    return json_response({"success": True, "message": f"directive {directive_id} deleted"})


def routes() -> list[BaseRoute]:
    base = "/v1/default/banks/{bank_id}/directives"
    one = base + "/{directive_id}"
    return [
        ApiRoute(
            base,
            create,
            methods=["POST"],
            tag="directives",
            summary="Create a directive",
            body=CreateDirectiveIn,
            response=DirectiveResponse,
        ),
        ApiRoute(
            base,
            list_all,
            methods=["GET"],
            tag="directives",
            summary="List directives",
            query=DirectivesQuery,
            response=DirectiveListResponse,
        ),
        ApiRoute(
            one,
            get_one,
            methods=["GET"],
            tag="directives",
            summary="One directive",
            response=DirectiveResponse,
        ),
        ApiRoute(
            one,
            update,
            methods=["PATCH"],
            tag="directives",
            summary="Change a directive (null leaves a field unchanged)",
            body=UpdateDirectiveIn,
            response=DirectiveResponse,
        ),
        ApiRoute(
            one,
            delete,
            methods=["DELETE"],
            tag="directives",
            summary="Delete a directive",
            response=DeleteResponse,
        ),
    ]
