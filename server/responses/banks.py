"""Answers of the bank routes: profile, list, stats, config, timeseries, tags, directives."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from server.responses.common import (
    Timestamp,
)


class Disposition(BaseModel):
    skepticism: int = Field(ge=1, le=5)
    literalism: int = Field(ge=1, le=5)
    empathy: int = Field(ge=1, le=5)


class BankProfileResponse(BaseModel):
    bank_id: str
    name: str
    mission: str
    background: str | None = None
    disposition: Disposition
    config: dict[str, Any] | None = None
    created_at: Timestamp = None
    updated_at: Timestamp = None


class BankListItem(BaseModel):
    bank_id: str
    name: str | None = None
    mission: str | None = None
    disposition: Disposition
    created_at: Timestamp = None
    updated_at: Timestamp = None


class BankListResponse(BaseModel):
    banks: list[BankListItem]
    total: int
    limit: int
    offset: int


class BankStatsResponse(BaseModel):
    bank_id: str
    total_nodes: int
    total_links: int
    total_documents: int
    total_entities: int | None = None
    total_observations: int | None = None
    nodes_by_fact_type: dict[str, int]
    links_by_link_type: dict[str, int]
    links_by_fact_type: dict[str, int]
    links_breakdown: dict[str, Any]
    pending_operations: int
    failed_operations: int
    operations_by_status: dict[str, int] | None = None
    last_memory_write_at: Timestamp = None
    last_consolidated_at: Timestamp = None
    pending_consolidation: int | None = None
    failed_consolidation: int | None = None


class BankConfigResponse(BaseModel):
    bank_id: str
    config: dict[str, Any]
    overrides: dict[str, Any]


class LifecyclePresetsResponse(BaseModel):
    """Engram's: the presets a bank's `lifecycle_preset` names, each with its settings."""

    default: str
    presets: dict[str, dict[str, Any]]


class TimeseriesBucket(BaseModel):
    time: str
    world: int = 0
    experience: int = 0
    observation: int = 0


class MemoriesTimeseriesResponse(BaseModel):
    bank_id: str
    period: str
    trunc: str
    time_field: str = "created_at"
    buckets: list[TimeseriesBucket]


class TagItem(BaseModel):
    tag: str
    count: int


class ListTagsResponse(BaseModel):
    items: list[TagItem]
    total: int
    limit: int
    offset: int


class BackgroundResponse(BaseModel):
    mission: str
    background: str | None = None
    disposition: Disposition | None = None


class DirectiveResponse(BaseModel):
    id: str
    bank_id: str
    name: str
    content: str
    priority: int = 0
    is_active: bool = True
    tags: list[str] | None = None
    created_at: Timestamp = None
    updated_at: Timestamp = None


class DirectiveListResponse(BaseModel):
    items: list[DirectiveResponse]
    total: int
    limit: int
    offset: int
