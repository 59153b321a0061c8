"""What LifecycleWorkflow and its activities exchange: ids, a time and counts, no text."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class LifecycleRequest:
    bank_id: str
    reason: str = "schedule"  # schedule | api | bench
    # The "now" decay and deletion are measured against; None: the workflow's time.
    now: datetime | None = None


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


@dataclass(frozen=True)
class LifecycleBatchResult:
    """Counted by the worker's metrics (worker/metrics.py) as well as returned."""

    scanned: int
    decayed: int
    archived: int
    merged: int
    deleted: int
    last_id: str | None


@dataclass(frozen=True)
class LifecycleDone:
    bank_id: str
    operation_id: str
    now: datetime
    counts: dict[str, int]
    status: str = "completed"
    error: str | None = None
