"""Records that travel between the import route, the import workflows and their activities.

None of them carries document content: documents wait in `import_documents` and are loaded
by the pipeline's steps (engine/retain/documents.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.retain.payloads import RetainOptions


@dataclass(frozen=True)
class ImportTotals:
    """What finished documents added up to (carried across continue-as-new)."""

    documents: int = 0
    items: int = 0
    facts_added: int = 0
    facts_removed: int = 0
    chunks_added: int = 0
    chunks_removed: int = 0
    links_added: int = 0
    documents_failed: int = 0
    failures: list[str] = field(default_factory=list)  # "<document id>: <reason>", the first few


@dataclass(frozen=True)
class ImportRequest:
    bank_id: str
    operation_id: str
    documents_total: int
    items_total: int
    options: RetainOptions = field(default_factory=RetainOptions)
    cursor: int = 0  # documents with seq < cursor are done (set when continuing as new)
    done: ImportTotals = field(default_factory=ImportTotals)
    # Documents per workflow run before it continues as new (about 10 history events each,
    # so a run stays far below Temporal's history limits whatever the import's size).
    documents_per_run: int = 500


@dataclass(frozen=True)
class ImportFinish:
    operation_id: str
    facts_changed: int = 0  # added + removed over the whole import
    keep_input: bool = False  # some documents failed: the staged file stays for a retry


@dataclass(frozen=True)
class ImportProgress:
    documents_total: int
    documents_done: int
    documents_failed: int
    items_total: int
    items_done: int
    facts_added: int

    def as_counts(self) -> dict[str, int]:
        return {
            "documents_total": self.documents_total,
            "documents_done": self.documents_done,
            "documents_failed": self.documents_failed,
            "items_total": self.items_total,
            "items_done": self.items_done,
            "facts_added": self.facts_added,
        }


@dataclass(frozen=True)
class ImportResult:
    operation_id: str
    totals: ImportTotals
