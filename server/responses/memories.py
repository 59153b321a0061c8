"""Answers of the memory routes: retain, recall, reflect, memories, documents, chunks, entities."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from server.responses.common import (
    Timestamp,
    TokenUsage,
)


class RetainResponse(BaseModel):
    success: bool
    bank_id: str
    items_count: int
    async_: bool = Field(alias="async", serialization_alias="async")
    operation_id: str | None = None
    documents: int | None = None
    document_ids: list[str] | None = None
    facts_added: int | None = None
    facts_removed: int | None = None
    chunks_added: int | None = None
    chunks_removed: int | None = None
    links_added: int | None = None


class RecallScores(BaseModel):
    final: float
    semantic: float | None = None
    keyword: float | None = None
    reranker: float | None = None
    fused: float | None = None


class RecallResult(BaseModel):
    id: str
    text: str
    type: str | None = None
    context: str | None = None
    occurred_start: Timestamp = None
    occurred_end: Timestamp = None
    mentioned_at: Timestamp = None
    document_id: str | None = None
    chunk_id: str | None = None
    metadata: dict[str, str] | None = None
    tags: list[str] | None = None
    entities: list[str] | None = None
    scores: RecallScores | None = None
    source_fact_ids: list[str] | None = None


class EntityState(BaseModel):
    entity_id: str
    canonical_name: str
    observations: list[dict[str, Any]]


class ChunkData(BaseModel):
    id: str
    text: str
    chunk_index: int
    truncated: bool | None = None


class RecallResponse(BaseModel):
    results: list[RecallResult]
    entities: dict[str, EntityState] | None = None
    chunks: dict[str, ChunkData] | None = None
    source_facts: dict[str, RecallResult] | None = None
    source_facts_truncated: bool | None = None
    trace: dict[str, Any] | None = None


class ReflectResponse(BaseModel):
    text: str
    usage: TokenUsage | None = None
    based_on: dict[str, Any] | None = None
    structured_output: dict[str, Any] | None = None
    structured_output_error: str | None = None
    trace: Any = None


class ReflectToolCall(BaseModel):
    tool: str
    input: dict[str, Any]
    output: dict[str, Any] | None = None
    duration_ms: int
    iteration: int


class ReflectModelCall(BaseModel):
    scope: str
    duration_ms: int


class ReflectProgressResponse(BaseModel):
    """Engram's: the live steps of a reflect question sent with `request_id`."""

    request_id: str
    status: Literal["running", "completed", "failed", "cancelled"]
    stage: str
    iteration: int
    tool_calls: list[ReflectToolCall]
    llm_calls: list[ReflectModelCall]


class MemoryUnitListItem(BaseModel):
    id: str
    text: str | None = None
    context: str | None = None
    date: str | None = None
    fact_type: str | None = None
    document_id: str | None = None
    chunk_id: str | None = None
    mentioned_at: Timestamp = None
    occurred_start: Timestamp = None
    occurred_end: Timestamp = None
    entities: str | None = None
    proof_count: int | None = None
    tags: list[str] | None = None
    metadata: dict[str, Any] | None = None
    source_memory_ids: list[str] | None = None
    state: str | None = None


class ListMemoryUnitsResponse(BaseModel):
    items: list[MemoryUnitListItem]
    total: int
    limit: int
    offset: int


class DocumentListItem(BaseModel):
    id: str
    bank_id: str | None = None
    content_hash: str | None = None
    created_at: Timestamp = None
    updated_at: Timestamp = None
    text_length: int | None = None
    memory_unit_count: int | None = None
    document_metadata: dict[str, Any] | None = None
    tags: list[str] | None = None


class ListDocumentsResponse(BaseModel):
    items: list[DocumentListItem]
    total: int
    limit: int
    offset: int


class ChunkResponse(BaseModel):
    chunk_id: str
    document_id: str
    bank_id: str
    chunk_index: int
    chunk_text: str
    created_at: str


class ChunkAttachment(BaseModel):
    """An original kept for a document, and where to fetch it."""

    id: str
    hash: str
    kind: str
    media_type: str
    byte_size: int
    filename: str | None = None
    url: str


class DocumentResponse(BaseModel):
    id: str
    bank_id: str
    original_text: str | None = None
    content_hash: str | None = None
    context: str | None = None
    created_at: str
    updated_at: str
    mentioned_at: Timestamp = None
    memory_unit_count: int
    nodes_by_fact_type: dict[str, int] | None = None
    tags: list[str] | None = None
    document_metadata: dict[str, Any] | None = None
    chunks: list[ChunkResponse] | None = None
    memories: list[MemoryUnitListItem] | None = None
    attachments: list[ChunkAttachment] | None = None


class DeleteDocumentResponse(BaseModel):
    success: bool
    message: str
    document_id: str
    memory_units_deleted: int


class ListChunksResponse(BaseModel):
    items: list[ChunkResponse]
    total: int
    limit: int
    offset: int


class EntityListItem(BaseModel):
    id: str
    canonical_name: str
    mention_count: int
    first_seen: Timestamp = None
    last_seen: Timestamp = None
    metadata: dict[str, Any] | None = None


class EntityListResponse(BaseModel):
    items: list[EntityListItem]
    total: int
    limit: int
    offset: int


class EntityObservation(BaseModel):
    text: str
    mentioned_at: Timestamp = None


class EntityDetailResponse(BaseModel):
    id: str
    canonical_name: str
    mention_count: int
    first_seen: Timestamp = None
    last_seen: Timestamp = None
    metadata: dict[str, Any] | None = None
    observations: list[EntityObservation]
    facts: list[MemoryUnitListItem] | None = None
    facts_total: int | None = None


class FileRetainResponse(BaseModel):
    operation_ids: list[str]


class UpdateDocumentResponse(BaseModel):
    success: bool = True
    memory_units_updated: int | None = None
