"""A bank at a glance: memories over time, tags; and the profile routes that edit the bank's
disposition and background."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Literal

from pydantic import BaseModel, Field
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from engine.errors import InvalidInput
from engine.store.banks import get_bank, put_bank
from engine.store.insights import PERIODS, TIME_FIELDS, list_tags, memories_timeseries
from server.http import (
    choice_param,
    int_param,
    iso,
    json_response,
    parse_body,
    path_param,
    services_of,
    text_param,
)
from server.openapi import ApiRoute
from server.queries import Limit, Offset
from server.responses import (
    BackgroundResponse,
    BankProfileResponse,
    ListTagsResponse,
    MemoriesTimeseriesResponse,
)
from server.routes.banks import disposition_json, profile_json
from server.schemas import DispositionIn
from server.schemas import Request as Body

MAX_BACKGROUND_CHARS = 20_000


class TimeseriesQuery(BaseModel):
    period: Literal["1h", "12h", "1d", "7d", "30d", "90d"] | None = None
    time_field: Literal["created_at", "mentioned_at", "occurred_start"] | None = None


class TagsQuery(BaseModel):
    q: str | None = Field(None, description="Wildcard pattern, e.g. 'user:*'; case-insensitive")
    source: Literal["memories", "mental_models"] | None = None
    limit: Limit | None = None
    offset: Offset | None = None


class ProfileIn(Body):
    disposition: DispositionIn


class BackgroundIn(Body):
    content: Annotated[str, Field(min_length=1, max_length=MAX_BACKGROUND_CHARS)]
    update_disposition: bool = True


async def timeseries(request: Request) -> Response:
    bank_id = path_param(request, "bank_id")
    period = choice_param(request, "period", tuple(PERIODS)) or "7d"
    # Hindsight falls back to created_at for an unknown field; so do we.
    raw_field = request.query_params.get("time_field") or "created_at"
    time_field = raw_field if raw_field in TIME_FIELDS else "created_at"
    async with services_of(request).pool.acquire() as conn:
        await get_bank(conn, bank_id)
        trunc, buckets = await memories_timeseries(
            conn, bank_id, period, time_field, datetime.now(UTC)
        )
    return json_response(
        {
            "bank_id": bank_id,
            "period": period,
            "trunc": trunc,
            "time_field": time_field,
            "buckets": [{"time": iso(b.time), **b.counts} for b in buckets],
        }
    )


async def tags(request: Request) -> Response:
    bank_id = path_param(request, "bank_id")
    source = choice_param(request, "source", ("memories", "mental_models")) or "memories"
    limit = int_param(request, "limit", 100)
    offset = int_param(request, "offset", 0, high=10**9)
    pattern = text_param(request, "q")
    async with services_of(request).pool.acquire() as conn:
        await get_bank(conn, bank_id)
        items, total = await list_tags(
            conn,
            bank_id,
            "memories" if source == "memories" else "mental_models",
            pattern,
            limit,
            offset,
        )
    return json_response(
        {
            "items": [{"tag": tag, "count": count} for tag, count in items],
            "total": total,
            "limit": limit,
            "offset": offset,
        }
    )


async def put_profile(request: Request) -> Response:
    bank_id = path_param(request, "bank_id")
    body = await parse_body(request, ProfileIn)
    traits = body.disposition.model_dump(exclude_none=True)
    if not traits:
        raise InvalidInput("disposition", "must set skepticism, literalism or empathy")
    async with services_of(request).pool.acquire() as conn:
        await get_bank(conn, bank_id)
        bank = await put_bank(conn, bank_id, config_changes={"disposition": traits})
    return json_response(profile_json(bank))


async def background(request: Request) -> Response:
    """Adds to the bank's background (Engram's mission: one text for both). Hindsight also
    rewrites the disposition from it with an LLM; Engram leaves the disposition as set."""
    bank_id = path_param(request, "bank_id")
    body = await parse_body(request, BackgroundIn)
    content = body.content.strip()
    if not content:
        raise InvalidInput("content", "must not be empty")
    async with services_of(request).pool.acquire() as conn, conn.transaction():
        bank = await get_bank(conn, bank_id)
        mission = f"{bank.mission}\n\n{content}" if bank.mission else content
        bank = await put_bank(conn, bank_id, mission=mission)
    return json_response(
        {"mission": bank.mission, "background": bank.mission, "disposition": disposition_json(bank)}
    )


def routes() -> list[BaseRoute]:
    base = "/v1/default/banks/{bank_id}"
    return [
        ApiRoute(
            base + "/stats/memories-timeseries",
            timeseries,
            methods=["GET"],
            tag="banks",
            summary="Memories added per time bucket, by fact type",
            query=TimeseriesQuery,
            response=MemoriesTimeseriesResponse,
        ),
        ApiRoute(
            base + "/tags",
            tags,
            methods=["GET"],
            tag="memories",
            summary="Tags in use, with how many memories (or mental models) carry each",
            query=TagsQuery,
            response=ListTagsResponse,
        ),
        ApiRoute(
            base + "/profile",
            put_profile,
            methods=["PUT"],
            tag="banks",
            summary="Set a bank's disposition",
            body=ProfileIn,
            response=BankProfileResponse,
        ),
        ApiRoute(
            base + "/background",
            background,
            methods=["POST"],
            tag="banks",
            summary="Add to a bank's background (its mission)",
            body=BackgroundIn,
            response=BackgroundResponse,
        ),
    ]
