"""The recall request body (Hindsight's RecallRequest), validated with pydantic.

Null means "not given" everywhere except `include.*`, where an explicit null means **off**
and a missing key means the server default (entities on, chunks and source facts off): the
reference client always sends all three keys, null unless the caller asked for them.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from pydantic import Field

from engine.errors import InvalidInput
from engine.limits import MAX_QUERY_CHARS, MAX_RECALL_TOKENS
from engine.recall.types import Budget, MinScores, RecallRequest, TimeWindow
from engine.store.memories import TagsMatch
from engine.types import FactType
from server.retain import parse_timestamp
from server.schemas import Request, Tags

_DAY = timedelta(days=1)
_TICK = timedelta(microseconds=1)

PositiveTokens = Annotated[int, Field(ge=1, le=MAX_RECALL_TOKENS)]


class EntitiesInclude(Request):
    max_tokens: PositiveTokens = 500


class ChunksInclude(Request):
    max_tokens: PositiveTokens = 8192


class SourceFactsInclude(Request):
    max_tokens: PositiveTokens = 4096
    max_tokens_per_observation: Annotated[int, Field(ge=-1, le=MAX_RECALL_TOKENS)] = -1


class RecallInclude(Request):
    entities: EntitiesInclude | None = Field(default_factory=EntitiesInclude)
    chunks: ChunksInclude | None = None
    source_facts: SourceFactsInclude | None = None


class TemporalWindowIn(Request):
    start: str
    end: str


class MinScoresIn(Request):
    semantic: float | None = None
    keyword: float | None = None
    reranker: float | None = None
    final: float | None = None


class RecallIn(Request):
    query: str
    types: list[FactType] | None = None
    budget: Budget | None = None
    max_tokens: PositiveTokens | None = None
    trace: bool | None = None
    query_timestamp: str | None = None
    include: RecallInclude | None = None
    tags: Tags | None = None
    tags_match: TagsMatch | None = None
    tag_groups: list[Any] | None = None
    prefer_observations: bool | None = None
    min_scores: MinScoresIn | None = None
    temporal_window: TemporalWindowIn | None = None
    include_archived: bool | None = None
    include_superseded: bool | None = None
    as_of: str | None = None


def _instant(raw: str, field: str) -> datetime:
    if raw == "unset":
        raise InvalidInput(field, "must be an ISO-8601 date or datetime")
    value = parse_timestamp(raw, field, datetime.now(UTC))
    if value is None:
        raise InvalidInput(field, "must be an ISO-8601 date or datetime")
    return value


def to_recall_request(bank_id: str, body: RecallIn) -> RecallRequest:
    """The engine's request, with the checks pydantic cannot express as a 400 on a field."""
    query = body.query.strip()
    if not query:
        raise InvalidInput("query", "must not be empty")
    if len(query) > MAX_QUERY_CHARS:
        raise InvalidInput(
            "query", f"is longer than {MAX_QUERY_CHARS} characters (about 500 tokens)"
        )
    if body.tag_groups:
        raise InvalidInput("tag_groups", "is not supported; use tags and tags_match")
    window = None
    if body.temporal_window is not None:
        start = _instant(body.temporal_window.start, "temporal_window.start")
        end = _instant(body.temporal_window.end, "temporal_window.end")
        if end < start:
            raise InvalidInput("temporal_window", "end is before start")
        # Both ends are inclusive on the wire; a date-only end means the whole day.
        inclusive_day = len(body.temporal_window.end) <= len("2025-01-01")
        window = TimeWindow(start, end + (_DAY if inclusive_day else _TICK))
    include = body.include or RecallInclude()
    floors = body.min_scores or MinScoresIn()
    return RecallRequest(
        bank_id=bank_id,
        query=query,
        types=tuple(dict.fromkeys(body.types or ())),
        budget=body.budget or "mid",
        max_tokens=body.max_tokens or 4096,
        query_timestamp=(
            _instant(body.query_timestamp, "query_timestamp") if body.query_timestamp else None
        ),
        temporal_window=window,
        tags=tuple(body.tags or ()),
        tags_match=body.tags_match or "any",
        include_entities=include.entities is not None,
        entities_max_tokens=include.entities.max_tokens if include.entities else 0,
        include_chunks=include.chunks is not None,
        chunks_max_tokens=include.chunks.max_tokens if include.chunks else 0,
        include_source_facts=include.source_facts is not None,
        source_facts_max_tokens=include.source_facts.max_tokens if include.source_facts else 0,
        prefer_observations=bool(body.prefer_observations),
        min_scores=MinScores(floors.semantic, floors.keyword, floors.reranker, floors.final),
        trace=bool(body.trace),
        include_archived=bool(body.include_archived),
        include_superseded=bool(body.include_superseded),
        as_of=_instant(body.as_of, "as_of") if body.as_of else None,
    )
