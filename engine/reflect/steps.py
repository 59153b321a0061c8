"""The payloads of reflect's activities (workflows/reflect.py ↔ activities/reflect.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.reflect.payloads import Evidence
from engine.reflect.prompt import Directive
from engine.reflect.search import Scope
from engine.reflect.tools import CheckedCall
from engine.store.banks import Disposition
from engine.store.memories import TagsMatch


@dataclass(frozen=True)
class ContextRequest:
    bank_id: str
    # The question's tag scope: tagged directives apply only when it matches their tags.
    tags: list[str] = field(default_factory=list)
    tags_match: TagsMatch = "any"
    apply_all_directives: bool = False  # ignore the tag scope: every active directive


@dataclass(frozen=True)
class ReflectContext:
    """What shapes the prompt, read from the bank; and whether a model is configured."""

    mission: str
    directives: list[Directive]
    disposition: Disposition
    llm_configured: bool


@dataclass(frozen=True)
class TurnRequest:
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None  # None: a final answer without tools
    scope: str  # "agent_1", ..., "final": names the call in the trace
    # The caller's cap on the answer, sent as the model's max_tokens (None: the model's own).
    max_tokens: int | None = None
    bank_id: str | None = None  # labels the call in the LLM request log


@dataclass(frozen=True)
class ModelToolCall:
    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class Turn:
    content: str | None
    tool_calls: list[ModelToolCall]
    input_tokens: int
    output_tokens: int
    duration_ms: int

    def as_message(self) -> dict[str, Any]:
        """The assistant turn to append to the history before the tool results."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in self.tool_calls
            ]
        return message


@dataclass(frozen=True)
class ToolRequest:
    scope: Scope
    call: CheckedCall


@dataclass(frozen=True)
class ToolOutcome:
    content: str  # the tool message the model reads (JSON)
    evidence: list[Evidence]
    output: dict[str, Any]  # the trace's view of the output
    duration_ms: int


@dataclass(frozen=True)
class EvidenceRequest:
    scope: Scope
    query: str
    include_mental_models: bool = True


@dataclass(frozen=True)
class EvidenceSet:
    mental_models: list[Evidence] = field(default_factory=list)
    observations: list[Evidence] = field(default_factory=list)
    facts: list[Evidence] = field(default_factory=list)
    # The question matched nothing: `facts` are the bank's latest instead.
    latest: bool = False

    def all(self) -> list[Evidence]:
        return [*self.mental_models, *self.observations, *self.facts]


@dataclass(frozen=True)
class StructureRequest:
    query: str
    answer: str
    response_schema: dict[str, Any]
    bank_id: str | None = None  # labels the call in the LLM request log


@dataclass(frozen=True)
class Structured:
    output: dict[str, Any] | None
    error: str | None
    input_tokens: int = 0
    output_tokens: int = 0
    duration_ms: int = 0
