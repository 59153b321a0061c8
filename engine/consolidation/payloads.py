"""Records that travel between the consolidation workflow and its activities.

Fields are added with defaults only, so running workflows keep decoding old payloads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

# `auto`: the llm path when the worker has an LLM, else the local one.
ConsolidationMode = Literal["auto", "llm", "local"]
OperationStatus = Literal["completed", "failed", "cancelled"]


@dataclass(frozen=True)
class ConsolidationCounts:
    facts: int = 0  # facts consolidated (taken off the backlog)
    created: int = 0
    reinforced: int = 0  # evidence added to an observation without changing its text
    updated: int = 0  # text revised (contradiction, or an llm update)
    merged: int = 0  # near-duplicates folded into another observation
    retracted: int = 0
    rejected: int = 0  # llm proposals refused by validation

    def plus(self, other: ConsolidationCounts) -> ConsolidationCounts:
        return ConsolidationCounts(
            self.facts + other.facts,
            self.created + other.created,
            self.reinforced + other.reinforced,
            self.updated + other.updated,
            self.merged + other.merged,
            self.retracted + other.retracted,
            self.rejected + other.rejected,
        )

    @classmethod
    def from_dict(cls, data: dict[str, int]) -> ConsolidationCounts:
        return cls(**{k: int(v) for k, v in data.items() if k in cls.__dataclass_fields__})

    def as_dict(self) -> dict[str, int]:
        return {
            "facts": self.facts,
            "created": self.created,
            "reinforced": self.reinforced,
            "updated": self.updated,
            "merged": self.merged,
            "retracted": self.retracted,
            "rejected": self.rejected,
        }


@dataclass(frozen=True)
class ConsolidationRequest:
    """Input of one ConsolidationWorkflow run; `operation_id` and `totals` carry over when
    the run continues as new."""

    bank_id: str
    reason: str = "retain"  # retain | schedule | api
    mode: ConsolidationMode = "auto"
    operation_id: str = ""
    totals: ConsolidationCounts = field(default_factory=ConsolidationCounts)
    batches: int = 0
    batch_size: int = 0  # facts per batch; 0: the activity's default for its path
    settle_seconds: float = 0.0  # wait before the first batch, for more facts to arrive


@dataclass(frozen=True)
class ConsolidationStart:
    bank_id: str
    operation_id: str
    workflow_id: str
    reason: str


@dataclass(frozen=True)
class BatchRequest:
    bank_id: str
    operation_id: str
    mode: ConsolidationMode = "auto"
    done_before: ConsolidationCounts = field(default_factory=ConsolidationCounts)
    limit: int = 0  # facts; 0: the activity's default for its path
    seq: int = -1  # the batch's position in its operation: a retry answers as the first try


@dataclass(frozen=True)
class BatchResult:
    counts: ConsolidationCounts
    backlog: int  # facts still waiting after this batch
    enabled: bool = True  # False: the bank is gone or has observations turned off
    mode: str = "local"
    rejections: list[str] = field(default_factory=list)  # why llm proposals were refused


@dataclass(frozen=True)
class ConsolidationDone:
    operation_id: str
    status: OperationStatus
    totals: ConsolidationCounts
    batches: int = 0
    error: str | None = None


@dataclass(frozen=True)
class SweepRequest:
    """The schedule's run: consolidate every bank with work, at most `limit` of them."""

    limit: int = 1000
