"""Answer shapes of the lifecycle routes (server/routes/lifecycle.py) and of the maintenance
routes issue 14 adds (retry, reprocess, document history, dry-run extraction, entity
regeneration, per-memory observation clearing, one audit entry), for the OpenAPI document.

Kept apart from server/responses.py, which holds the original v1 shapes and is near the size
at which a module is split.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, RootModel

from engine.store.document_history import DocumentEventKind
from server.responses import MemoryUnitListItem, TokenUsage

Timestamp = str | None


class UpdatedMemoryResponse(MemoryUnitListItem):
    """The corrected memory: a list item, with its entities as a list."""

    bank_id: str
    entities: list[str] | None = None  # type: ignore[assignment]
    importance: float | None = None
    strength: float | None = None
    superseded_by: str | None = None
    needs_correction: bool | None = None


class MemoryHistoryEntry(BaseModel):
    """One change of an observation (merge, update, retraction) or of a fact (correction,
    supersession, archive, restore, feedback); `previous` only for a fact's."""

    version: int
    change: str
    previous_text: str | None = None
    text: str | None = None
    reason: str | None = None
    fact_ids: list[str]
    related_id: str | None = None
    changed_at: str | None = None
    previous: dict[str, Any] | None = None


class MemoryHistoryResponse(RootModel[list[MemoryHistoryEntry]]):
    """A memory's history, newest first."""


class ForgottenMemory(BaseModel):
    id: str
    text: str
    fact_type: str
    document_id: str | None = None
    collateral: bool


class ForgetResponse(BaseModel):
    success: bool
    dry_run: bool
    deleted_count: int
    memories: list[ForgottenMemory]
    observations_retracted: list[str]
    entities_removed: list[str]
    documents_deleted: list[str]
    chunks_deleted: int
    chunks_redacted: int
    mental_models_affected: list[str]


class FeedbackResponse(BaseModel):
    success: bool
    memory_id: str
    signal: Literal["useful", "not_useful", "wrong"]
    importance_before: float
    importance: float
    needs_correction: bool


class LifecycleRunResponse(BaseModel):
    success: bool
    bank_id: str
    counts: dict[str, int]


class RetryOperationResponse(BaseModel):
    success: bool
    message: str
    operation_id: str


class ReprocessDocumentResponse(BaseModel):
    success: bool
    operation_id: str
    items_count: int


class ObservationIdSample(BaseModel):
    count: int = 0
    ids: list[str] = Field(default_factory=list)


class DocumentEvent(BaseModel):
    document_id: str
    kind: DocumentEventKind
    created_at: Timestamp = None
    operation_id: str | None = None
    fact_id: str | None = None
    facts_added: int = 0
    facts_removed: int = 0
    observations_created: ObservationIdSample | None = None
    observations_updated: ObservationIdSample | None = None
    observations_removed: ObservationIdSample | None = None
    # Engram's additions: the version's content hash and sizes.
    content_hash: str | None = None
    items_count: int | None = None
    chunks_added: int | None = None
    chunks_removed: int | None = None


class DocumentHistoryResponse(BaseModel):
    document_id: str
    total: int
    limit: int
    offset: int
    items: list[DocumentEvent]


class ExtractedFact(BaseModel):
    text: str
    fact_type: str
    occurred_start: str | None = None
    occurred_end: str | None = None
    entities: list[str] = Field(default_factory=list)
    chunk_index: int | None = None


class ExtractionChunk(BaseModel):
    text: str
    fact_count: int


class DryRunExtractionResult(BaseModel):
    facts: list[ExtractedFact]
    chunks: list[ExtractionChunk]
    usage: TokenUsage
    # Engram's addition: the mode the preview ran in.
    extraction_mode: Literal["llm", "local", "none"] | None = None


class ClearMemoryObservationsResponse(BaseModel):
    deleted_count: int


class AuditLogEntryResponse(BaseModel):
    id: str
    action: str
    transport: str
    bank_id: str | None
    started_at: str | None
    ended_at: str | None
    duration_ms: int | None = None
    metadata: dict[str, Any]
    request: dict[str, Any] | None
    response: dict[str, Any] | None


class MentalModelRefreshScope(BaseModel):
    tags: list[str] | None = None
    tags_match: str
    tag_groups: list[Any] | None = None
    fact_types: list[str] | None = None
    exclude_mental_models: bool
    exclude_mental_model_ids: list[str] | None = None


class MentalModelRefreshWindow(BaseModel):
    created_after: str | None = None
    created_before: str
    watermark: str | None = None


class MentalModelFactCounts(BaseModel):
    retrieved: dict[str, int] | None = None
    used: dict[str, int] | None = None


RefreshOutcome = Literal[
    "content_written",
    "content_unchanged",
    "content_preserved_no_new_facts",
    "refresh_failed_empty_candidate",
    "refresh_failed_delta_not_applied",
]


class MentalModelRefreshTrace(BaseModel):
    recorded_at: str | None = None
    effective_mode: Literal["full", "delta"]
    mode_fallback_reason: str | None = None
    outcome: RefreshOutcome
    tool_calls: list[dict[str, Any]] | None = None
    llm_calls: list[dict[str, Any]] | None = None
    usage: TokenUsage | None = None
    duration_ms: int | None = 0
    warnings: list[str] | None = None


class MentalModelDryRunRefreshResult(BaseModel):
    mental_model_id: str
    name: str
    requested_mode: Literal["full", "delta"]
    effective_mode: Literal["full", "delta"]
    mode_fallback_reason: str | None = None
    outcome: RefreshOutcome
    would_persist: bool
    scope: MentalModelRefreshScope
    window: MentalModelRefreshWindow
    facts: MentalModelFactCounts
    based_on: dict[str, list[dict[str, Any]]] | None = None
    current_content: str
    candidate_content: str
    preview_content: str
    diff: str
    delta_operations: dict[str, Any] | None = None
    retraction: dict[str, Any] | None = None
    trace: MentalModelRefreshTrace
    usage: TokenUsage | None = None
    duration_ms: int | None = 0
    warnings: list[str] | None = None
