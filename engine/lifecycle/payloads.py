"""What LifecycleWorkflow and its activities exchange: ids, a time and counts, no text."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

# Batches one workflow run executes before it continues as new (a fresh history): ~10
# history events a batch keep a run near 1,000 events however large the bank.
BATCHES_PER_RUN = 100
# Memories per batch (one activity, one transaction).
BATCH_SIZE = 500


@dataclass(frozen=True)
class LifecycleResume:
    """Where a run that continued as new left off: the same operation, policy and counts."""

    operation_id: str
    policy: dict[str, Any]
    after_id: str
    seq: int
    counts: dict[str, int]
    observations_retracted: int = 0
    models: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class LifecycleRequest:
    bank_id: str
    reason: str = "schedule"  # schedule | api | bench
    # The "now" decay and deletion are measured against; None: the workflow's time.
    now: datetime | None = None
    resume: LifecycleResume | None = None  # set by the run that continued as new
    batches_per_run: int = BATCHES_PER_RUN
    batch_size: int = BATCH_SIZE


@dataclass(frozen=True)
class LifecycleStart:
    bank_id: str
    operation_id: str
    workflow_id: str
    now: datetime


@dataclass(frozen=True)
class LifecyclePlan:
    """None of it when the bank is gone (its schedule is then deleted)."""

    exists: bool
    policy: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class LifecycleBatchRequest:
    bank_id: str
    operation_id: str
    now: datetime
    policy: dict[str, Any]
    after_id: str | None
    seq: int
    size: int = BATCH_SIZE


@dataclass(frozen=True)
class LifecycleBatchResult:
    """Counted by the worker's metrics (worker/metrics.py) as well as returned."""

    scanned: int
    decayed: int
    archived: int
    merged: int
    deleted: int
    last_id: str | None
    # What the batch leaves for others: observations to rebuild, mental models to refresh.
    observations_retracted: int = 0
    models: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class LifecycleDone:
    bank_id: str
    operation_id: str
    now: datetime
    counts: dict[str, int]
    status: str = "completed"
    error: str | None = None
