"""Query strings of the v1 routes, for the OpenAPI document (`server/openapi.py`).

The handlers read them with `server.http`'s helpers (bounded ints, choices); these models
describe the same names and bounds.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field

from engine.store.memories import TagsMatch
from engine.types import FactType

Limit = Annotated[int, Field(ge=0, le=1000)]
Offset = Annotated[int, Field(ge=0)]


class PageQuery(BaseModel):
    limit: Limit | None = None
    offset: Offset | None = None


class OperationsQuery(BaseModel):
    status: (
        Literal["pending", "processing", "running", "completed", "failed", "cancelled"] | None
    ) = None
    limit: Annotated[int, Field(ge=0, le=100)] | None = None
    offset: Offset | None = None


class MemoryListQuery(BaseModel):
    type: FactType | None = None
    q: str | None = Field(default=None, description="Only memories whose text contains this")
    document_id: str | None = None
    entity_id: str | None = None
    tags: list[str] | None = None
    tags_match: TagsMatch | None = None
    time_field: (
        Literal["created_at", "updated_at", "mentioned_at", "occurred_start", "occurred_end"] | None
    ) = None
    start_date: str | None = None
    end_date: str | None = None
    limit: Limit | None = None
    offset: Offset | None = None
