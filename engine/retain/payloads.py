"""Records that travel between the API, the retain workflows and their activities.

Large intermediate results (facts, embeddings, entity ids, links) are staged in PostgreSQL
(`staged_facts`) instead of travelling in payloads, which keeps workflow histories small.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

UpdateMode = Literal["replace", "append"]


@dataclass(frozen=True)
class RetainItem:
    content: str
    timestamp: datetime | None  # None: the caller sent "unset"
    context: str = ""
    metadata: dict[str, str] = field(default_factory=dict)
    entities: list[str] = field(default_factory=list)  # caller hints
    tags: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class DocumentInput:
    document_id: str
    items: list[RetainItem]
    update_mode: UpdateMode = "replace"
    explicit_id: bool = True  # False: the id was derived from the content


@dataclass(frozen=True)
class RetainOptions:
    """The bank's settings as they were when the request arrived."""

    extraction_mode: Literal["llm", "local", "none"] = "local"
    chunk_size: int = 3000
    retain_mission: str = ""
    enable_entity_links: bool = True
    enable_semantic_links: bool = True
    enable_temporal_links: bool = True
    enable_causal_links: bool = True
    enable_observations: bool = True  # consolidate the bank after the retain


@dataclass(frozen=True)
class RetainRequest:
    bank_id: str
    operation_id: str
    documents: list[DocumentInput]
    options: RetainOptions = field(default_factory=RetainOptions)


@dataclass(frozen=True)
class DocumentBatch:
    """Documents one child workflow retains; one document when its id was explicit."""

    bank_id: str
    operation_id: str
    documents: list[DocumentInput]
    options: RetainOptions = field(default_factory=RetainOptions)


@dataclass(frozen=True)
class ChunkJob:
    bank_id: str
    document_id: str
    chunk_id: str
    text: str
    mentioned_at: datetime | None
    context: str = ""
    speaker: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    tags: list[str] = field(default_factory=list)
    entity_hints: list[str] = field(default_factory=list)
    content_hash: str = ""
    char_start: int | None = None
    char_end: int | None = None


@dataclass(frozen=True)
class DocumentPlan:
    document_id: str
    new_chunks: list[ChunkJob]  # to extract
    kept_chunk_ids: list[str]  # unchanged: their facts stay as they are
    dropped_chunk_ids: list[str]  # gone from the document: their facts are removed


@dataclass(frozen=True)
class RetainPlan:
    bank_id: str
    operation_id: str
    documents: list[DocumentPlan]


@dataclass(frozen=True)
class ExtractionBatch:
    operation_id: str
    extraction_mode: Literal["llm", "local", "none"]
    chunks: list[ChunkJob]
    retain_mission: str = ""


@dataclass(frozen=True)
class StagedFacts:
    """Fact ids written to staging by one step, in a stable order."""

    bank_id: str
    operation_id: str
    fact_ids: list[str]
    # Embedding order among concurrent callers, lowest first (engine.retain.gate): retains 0,
    # imported documents their position + 1.
    priority: int = 0


@dataclass(frozen=True)
class LinkOptions:
    bank_id: str
    operation_id: str
    fact_ids: list[str]
    entity: bool = True
    semantic: bool = True
    temporal: bool = True
    causal: bool = True


@dataclass(frozen=True)
class UpsertDocument:
    bank_id: str
    operation_id: str
    plan: DocumentPlan
    items: list[RetainItem]
    update_mode: UpdateMode = "replace"


@dataclass(frozen=True)
class UpsertResult:
    document_id: str
    facts_added: int
    facts_removed: int
    chunks_added: int
    chunks_removed: int
    links_added: int


@dataclass(frozen=True)
class RetainResult:
    operation_id: str
    documents: int
    facts_added: int
    facts_removed: int
    chunks_added: int
    chunks_removed: int
    links_added: int
    document_ids: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class OperationUpdate:
    operation_id: str
    status: Literal["pending", "running", "completed", "failed", "cancelled"]
    progress: dict[str, int] = field(default_factory=dict)
    result: dict[str, object] | None = None
    error: str | None = None
