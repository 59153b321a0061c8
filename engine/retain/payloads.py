"""Records that travel between the API, the retain workflows and their activities.

No payload carries memory text: a request's items wait in `retain_documents` (an import's in
`import_documents`), plans in `document_plans`, and intermediate results (facts, embeddings,
entity ids, links) in `staged_facts`; payloads carry ids, counts and options, so their size
does not grow with the size of an item (engine/retain/documents.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

# reprocess: every chunk of the stored document is extracted again (replace otherwise).
UpdateMode = Literal["replace", "append", "reprocess"]
# Where a batch's documents are staged: a retain request or an import.
Source = Literal["retain", "import"]
EndStatus = Literal["completed", "failed", "cancelled"]


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
    """A retain whose documents are staged (engine/retain/documents.py) under its operation."""

    bank_id: str
    operation_id: str
    documents_total: int
    items_total: int
    options: RetainOptions = field(default_factory=RetainOptions)


@dataclass(frozen=True)
class DocumentRef:
    seq: int
    document_id: str
    records: int  # items (retain) or source records (import)


@dataclass(frozen=True)
class DocumentPage:
    source: Source
    operation_id: str
    after_seq: int  # -1 for the first page
    limit: int


@dataclass(frozen=True)
class BatchJob:
    """Staged documents that one DocumentBatchWorkflow takes through the pipeline."""

    bank_id: str
    operation_id: str
    source: Source
    documents: list[DocumentRef]
    options: RetainOptions = field(default_factory=RetainOptions)
    # Embedding order among concurrent callers, lowest first (engine.retain.gate).
    priority: int = 0


@dataclass(frozen=True)
class ClaimRequest:
    bank_id: str
    operation_id: str
    workflow_id: str
    document_ids: list[str]


@dataclass(frozen=True)
class ClaimResult:
    claimed: list[str]
    busy: list[str]  # claimed by another write; this workflow is signalled on release


@dataclass(frozen=True)
class PlanRequest:
    bank_id: str
    operation_id: str
    source: Source
    seqs: list[int]
    chunk_size: int


@dataclass(frozen=True)
class PlannedDocument:
    seq: int
    new_chunks: int
    chars: int = 0  # of the new chunks, all together (0: planned before it was counted)


@dataclass(frozen=True)
class DocumentFailure:
    seq: int
    document_id: str
    message: str


@dataclass(frozen=True)
class PlanResult:
    planned: list[PlannedDocument]
    failed: list[DocumentFailure]


@dataclass(frozen=True)
class ChunkSlice:
    """New chunks [start, stop) of a staged document's plan."""

    seq: int
    start: int
    stop: int


@dataclass(frozen=True)
class ExtractionJob:
    bank_id: str
    operation_id: str
    extraction_mode: Literal["llm", "local", "none"]
    slices: list[ChunkSlice]
    retain_mission: str = ""


@dataclass(frozen=True)
class UpsertBatch:
    bank_id: str
    operation_id: str
    source: Source
    seqs: list[int]


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
class DocumentOutcome:
    seq: int
    result: UpsertResult


@dataclass(frozen=True)
class UpsertBatchResult:
    done: list[DocumentOutcome]
    failed: list[DocumentFailure]
    waiters: list[str]  # workflows to tell that documents were released


@dataclass(frozen=True)
class BatchResult:
    done: list[DocumentOutcome]
    failed: list[DocumentFailure]


@dataclass(frozen=True)
class BatchProgress:
    """A batch's share of its work done, in thousandths (signalled to its parent)."""

    seqs: list[int]
    permille: int


@dataclass(frozen=True)
class OperationEnd:
    """An operation's end: its staging is discarded and its claims released."""

    operation_id: str
    status: EndStatus
    progress: dict[str, int] = field(default_factory=dict)
    error: str | None = None
    result: dict[str, object] | None = None
    # Retain: the result is the totals and document ids of the documents' upsert results.
    result_from_documents: bool = False


@dataclass(frozen=True)
class RetainResult:
    """Totals; the document ids are in the operation's result (they may be many)."""

    operation_id: str
    documents: int
    facts_added: int
    facts_removed: int
    chunks_added: int
    chunks_removed: int
    links_added: int


@dataclass(frozen=True)
class OperationUpdate:
    operation_id: str
    status: Literal["pending", "running", "completed", "failed", "cancelled"]
    progress: dict[str, int] = field(default_factory=dict)
    result: dict[str, object] | None = None
    error: str | None = None
