"""What travels between the transfer routes, TransferWorkflow and its activities: ids,
flags and storage keys, never bank content (that stays in PostgreSQL)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Literal

from engine.transfer.sections import Group

Kind = Literal["transfer_export", "document_export", "transfer_import", "document_import", "clone"]
Mode = Literal["restore", "merge"]
Conflict = Literal["skip", "replace", "new-id"]


@dataclass(frozen=True)
class ImportPlan:
    operation_id: str
    bank_id: str  # the bank written to
    mode: Mode = "restore"
    document_conflict: Conflict = "skip"
    include_data: bool = True
    include_bank_config: bool = True
    include_history: bool = False


@dataclass(frozen=True)
class ExportScope:
    """What an export carries. `document_ids` set: those documents only, no bank sections."""

    include_data: bool = True
    include_bank_config: bool = True
    include_history: bool = False
    include_observations: bool = True
    include_mental_models: bool = True
    document_ids: list[str] | None = None

    def groups(self) -> set[Group]:
        chosen: set[Group] = set()
        if self.include_data or self.document_ids is not None:
            chosen.add("data")
        if self.document_ids is None:
            if self.include_bank_config:
                chosen.add("config")
            if self.include_history:
                chosen.add("history")
        return chosen


@dataclass(frozen=True)
class TransferRequest:
    """An export (`scope`), an import (`plan` of the archive at `archive_key`) or both in turn
    (a clone: the export's archive is imported, then discarded)."""

    kind: Kind
    bank_id: str  # the bank the operation is recorded against (the source)
    operation_id: str
    scope: ExportScope | None = None
    plan: ImportPlan | None = None
    archive_key: str | None = None


@dataclass(frozen=True)
class ExportJob:
    bank_id: str
    operation_id: str
    scope: ExportScope
    key: str
    filename: str


@dataclass(frozen=True)
class ImportJob:
    plan: ImportPlan
    archive_key: str


@dataclass(frozen=True)
class TransferEnd:
    operation_id: str
    discard_key: str | None = None


def export_key(operation_id: str) -> str:
    """Storage keys are path-safe whatever the operation id (a client may choose it)."""
    return f"export-{uuid.uuid5(uuid.NAMESPACE_URL, 'engram:' + operation_id)}.zip"
