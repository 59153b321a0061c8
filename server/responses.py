"""Answer shapes of the v1 routes, for the OpenAPI document (`server/openapi.py`).

Required keys are the ones Hindsight's reference client requires (docs/wire-format.md §11);
timestamps are ISO-8601 strings. Extra keys are allowed: clients ignore them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

Timestamp = str | None


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


class DeleteResponse(BaseModel):
    success: bool
    message: str | None = None
    deleted_count: int | None = None


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


class TokenUsage(BaseModel):
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    cached_tokens: int = 0
    thoughts_tokens: int = 0


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


class OperationProgress(BaseModel):
    stage: str
    at: str | None
    processed: int | None = None
    total: int | None = None
    detail: dict[str, int] | None = None


OperationStatus = Literal["pending", "processing", "completed", "failed", "cancelled", "not_found"]


class OperationResponse(BaseModel):
    id: str
    operation_id: str | None = None
    task_type: str
    items_count: int
    created_at: str
    status: OperationStatus
    updated_at: Timestamp = None
    completed_at: Timestamp = None
    error_message: str | None = None
    progress: OperationProgress | None = None
    result_metadata: dict[str, Any] | None = None


class OperationsListResponse(BaseModel):
    bank_id: str
    operations: list[OperationResponse]
    total: int
    limit: int
    offset: int


class CancelOperationResponse(BaseModel):
    success: bool
    message: str
    operation_id: str


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


class Features(BaseModel):
    observations: bool
    mcp: bool
    worker: bool
    bank_config_api: bool
    bank_llm_health: bool
    file_upload_api: bool
    document_export_api: bool
    document_import_api: bool
    audit_log: bool
    llm_trace: bool
    store_document_text: bool


class VersionResponse(BaseModel):
    api_version: str
    engram_version: str | None = None
    features: Features


class LiveResponse(BaseModel):
    status: Literal["alive"]
    version: str
    uptime_seconds: float


class NotImplementedResponse(BaseModel):
    detail: str
    use_instead: str | None = None


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


class FileRetainResponse(BaseModel):
    operation_ids: list[str]


class UpdateDocumentResponse(BaseModel):
    success: bool = True
    memory_units_updated: int | None = None


class LLMRequestEntry(BaseModel):
    id: str
    bank_id: str | None
    operation: str | None
    model: str | None
    status: str
    started_at: Timestamp
    ended_at: Timestamp
    duration_ms: int | None
    input_tokens: int | None
    output_tokens: int | None
    total_tokens: int | None
    error: str | None


class LLMRequestListResponse(BaseModel):
    bank_id: str
    total: int
    limit: int
    offset: int
    items: list[LLMRequestEntry]


class LLMTokenSums(BaseModel):
    input: int
    output: int
    cached: int
    total: int


class LLMRequestStatsBucket(BaseModel):
    time: str
    statuses: dict[str, int]
    total: int
    tokens: LLMTokenSums


class LLMRequestStatsResponse(BaseModel):
    bank_id: str
    period: str
    trunc: str
    start: str
    buckets: list[LLMRequestStatsBucket]


class BankLlmHealthResponse(BaseModel):
    bank_id: str
    operations: list[dict[str, Any]]


class WebhookResponse(BaseModel):
    id: str
    bank_id: str | None
    url: str
    secret: str | None = None
    event_types: list[str]
    enabled: bool
    http_config: dict[str, Any] | None = None
    created_at: Timestamp = None
    updated_at: Timestamp = None


class WebhookListResponse(BaseModel):
    items: list[WebhookResponse]


class WebhookDeliveryResponse(BaseModel):
    id: str
    webhook_id: str | None
    url: str
    event_type: str
    status: str
    attempts: int
    last_error: str | None = None
    last_response_status: int | None = None
    last_attempt_at: Timestamp = None
    created_at: Timestamp = None
    updated_at: Timestamp = None


class WebhookDeliveryListResponse(BaseModel):
    items: list[WebhookDeliveryResponse]
    next_cursor: str | None = None
