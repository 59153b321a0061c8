"""Records that travel between the mental-model refresh workflow and its activities.

Fields are added with defaults only, so running workflows keep decoding old payloads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from engine.reflect.payloads import Budget, ReflectOutput

Kind = Literal["model", "report"]
# Why a refresh was asked for: the API (create, refresh), a consolidation that changed
# something, or the model's cron schedule.
RefreshReason = Literal["created", "api", "consolidation", "schedule", "updated", "lifecycle"]
AUTOMATIC: tuple[RefreshReason, ...] = ("consolidation", "schedule", "lifecycle")
RefreshStatus = Literal["refreshed", "skipped", "failed", "missing"]
OperationStatus = Literal["completed", "failed", "cancelled"]


@dataclass(frozen=True)
class RefreshAsk:
    """One request for a refresh; asks that arrive while a refresh runs share the next pass."""

    reason: RefreshReason
    operation_id: str = ""  # empty: the workflow registers one
    force: bool = False  # run even when nothing relevant changed ({"mode": "full"})


@dataclass(frozen=True)
class RefreshRequest:
    bank_id: str
    model_id: str
    asks: list[RefreshAsk] = field(default_factory=list)


@dataclass(frozen=True)
class TriggerRequest:
    """What a model's schedule (or a consolidation) starts: ask for one refresh."""

    bank_id: str
    model_id: str
    reason: RefreshReason = "schedule"


@dataclass(frozen=True)
class PlanRequest:
    bank_id: str
    model_id: str
    now: datetime
    force: bool = False
    # Automatic refreshes respect the trigger's min_refresh_interval_seconds.
    respect_interval: bool = False


@dataclass(frozen=True)
class RefreshPlan:
    """What the next refresh should do, decided from the stored model and the evidence."""

    exists: bool
    run: bool = False
    reason: str = ""  # why it runs, or why it is skipped
    wait_seconds: float = 0.0  # > 0: wait this long first (min refresh interval), then re-plan
    digest: str = ""
    kind: Kind = "model"
    questions: list[str] = field(default_factory=list)
    budget: Budget = "mid"
    max_tokens: int = 2048
    tags: list[str] = field(default_factory=list)
    tags_match: str = "any"
    fact_types: list[str] = field(default_factory=list)
    exclude_mental_models: bool = False
    exclude_mental_model_ids: list[str] = field(default_factory=list)
    response_schema: dict[str, Any] | None = None
    keep_trace: bool = False


@dataclass(frozen=True)
class Answer:
    question: str
    output: ReflectOutput


@dataclass(frozen=True)
class StoreRequest:
    bank_id: str
    model_id: str
    operation_id: str
    answers: list[Answer]
    digest: str
    reason: str
    refreshed_at: datetime


@dataclass(frozen=True)
class FailureRecord:
    bank_id: str
    model_id: str
    error: str
    failed_at: datetime


@dataclass(frozen=True)
class BeginRefresh:
    bank_id: str
    model_id: str
    workflow_id: str
    operation_ids: list[str]


@dataclass(frozen=True)
class FinishRefresh:
    operation_ids: list[str]
    status: OperationStatus
    result: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


@dataclass(frozen=True)
class RefreshOutcome:
    model_id: str
    status: RefreshStatus
    version: int = 0
    reason: str = ""


@dataclass(frozen=True)
class ConsolidatedBank:
    """A bank whose consolidation changed observations: its models may need a refresh."""

    bank_id: str
