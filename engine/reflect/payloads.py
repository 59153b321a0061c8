"""What `ReflectWorkflow` takes and returns (workflows/reflect.py).

The shared contract between the reflect route, mental-model refreshes and nightly reports,
which all run reflect as a workflow (a refresh runs it as a child workflow).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

Budget = Literal["low", "mid", "high"]
# What a reflect answer can rest on: memory units by their fact_type, or a mental model.
EvidenceKind = Literal["world", "experience", "observation", "mental_model"]


@dataclass(frozen=True)
class ReflectInput:
    bank_id: str
    query: str
    now: datetime  # the "now" for relative dates in the question
    budget: Budget = "mid"
    context: str = ""
    max_tokens: int = 4096
    response_schema: dict[str, Any] | None = None
    tags: list[str] = field(default_factory=list)
    tags_match: str = "any"
    fact_types: list[str] = field(default_factory=list)  # empty: all
    exclude_mental_models: bool = False
    exclude_mental_model_ids: list[str] = field(default_factory=list)
    include_trace: bool = False
    operation_id: str = ""  # set when an operation row tracks this run
    # Added for the reflect route and tests; defaults keep older callers working.
    include_tool_outputs: bool = True  # with include_trace: tool outputs in the trace
    wall_clock_limit_s: float = 300.0  # workflow time; past it the answer is synthesised
    context_limit_tokens: int = 24_000  # estimated prompt size that forces synthesis
    observations_max_tokens: int = 2048  # what one search_observations call may return
    apply_all_directives: bool = False  # every active directive, whatever its tags


@dataclass(frozen=True)
class Evidence:
    """One item the answer is based on."""

    id: str
    kind: EvidenceKind
    text: str
    occurred_start: datetime | None = None
    occurred_end: datetime | None = None
    name: str = ""  # a mental model's name
    context: str = ""
    mentioned_at: datetime | None = None
    document_id: str | None = None
    chunk_id: str | None = None
    tags: list[str] = field(default_factory=list)
    metadata: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ReflectUsage:
    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True)
class ReflectOutput:
    text: str
    based_on: list[Evidence] = field(default_factory=list)
    directives: list[str] = field(default_factory=list)  # the directives that shaped it
    structured_output: dict[str, Any] | None = None
    structured_output_error: str | None = None
    usage: ReflectUsage = field(default_factory=ReflectUsage)
    llm_configured: bool = True  # False: no model; `text` says so and lists the evidence
    trace: dict[str, Any] | None = None
