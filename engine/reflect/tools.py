"""The reflect agent's tools: their OpenAI schemas and the checking of what the model sent.

Checking is pure (no I/O), so the workflow runs it itself: a call to an unknown tool or with
arguments that are not the JSON object the schema asks for becomes a tool result telling the
model what was wrong, and the loop goes on.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from engine.limits import MAX_QUERY_CHARS

ToolName = Literal["search_mental_models", "search_observations", "recall", "expand", "done"]
TOOL_NAMES: tuple[ToolName, ...] = (
    "search_mental_models",
    "search_observations",
    "recall",
    "expand",
    "done",
)
SEARCH_TOOLS: tuple[ToolName, ...] = ("search_mental_models", "search_observations", "recall")

_QUERY = {"type": "string", "description": "what to look for, in plain words"}


def _function(
    name: str, description: str, properties: dict[str, Any], required: list[str]
) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": False,
            },
        },
    }


def tool_specs(include_mental_models: bool) -> list[dict[str, Any]]:
    """The tools offered to the model (without search_mental_models when they are excluded)."""
    specs = [
        _function(
            "search_observations",
            "Consolidated beliefs about the bank's subjects, each with its supporting facts.",
            {"query": _QUERY},
            ["query"],
        ),
        _function(
            "recall",
            "Raw facts (what was said or happened), ranked for the query.",
            {"query": _QUERY},
            ["query"],
        ),
        _function(
            "expand",
            "The source text of a fact: its chunk, or the whole document.",
            {
                "memory_id": {"type": "string", "description": "a fact id from recall"},
                "depth": {"type": "string", "enum": ["chunk", "document"]},
            },
            ["memory_id"],
        ),
        _function(
            "done",
            "Finish with the answer and the ids of the memories and mental models it rests on.",
            {
                "answer": {"type": "string", "description": "the answer, in markdown"},
                "ids": {"type": "array", "items": {"type": "string"}},
            },
            ["answer"],
        ),
    ]
    if include_mental_models:
        specs.insert(
            0,
            _function(
                "search_mental_models",
                "Curated summaries kept current for recurring questions; check these first.",
                {"query": _QUERY},
                ["query"],
            ),
        )
    return specs


@dataclass(frozen=True)
class CheckedCall:
    """A tool call whose name and arguments passed the checks."""

    name: ToolName
    query: str = ""
    memory_id: str = ""
    depth: Literal["chunk", "document"] = "chunk"
    answer: str = ""
    ids: list[str] = field(default_factory=list)

    def arguments(self) -> dict[str, Any]:
        if self.name == "expand":
            return {"memory_id": self.memory_id, "depth": self.depth}
        if self.name == "done":
            return {"answer": self.answer, "ids": self.ids}
        return {"query": self.query}


@dataclass(frozen=True)
class CallError:
    """Why a tool call was refused; sent back to the model as the tool's result."""

    message: str


def check_call(name: str, raw_arguments: str, offered: list[str]) -> CheckedCall | CallError:
    if name not in offered:
        return CallError(f"unknown tool {name!r}; the tools are: {', '.join(offered)}")
    try:
        args = json.loads(raw_arguments or "{}")
    except json.JSONDecodeError as exc:
        return CallError(f"the arguments of {name} are not valid JSON ({exc.msg}); resend them")
    if not isinstance(args, dict):
        return CallError(f"the arguments of {name} must be a JSON object")
    tool: ToolName = next(t for t in TOOL_NAMES if t == name)
    if tool == "done":
        answer, ids = args.get("answer"), args.get("ids", [])
        if not isinstance(answer, str) or not answer.strip():
            return CallError("done needs a non-empty string 'answer'")
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            return CallError("done's 'ids' must be a list of strings")
        return CheckedCall(tool, answer=answer.strip(), ids=list(dict.fromkeys(ids)))
    if tool == "expand":
        memory_id, depth = args.get("memory_id"), args.get("depth", "chunk")
        if not isinstance(memory_id, str) or not memory_id.strip():
            return CallError("expand needs a string 'memory_id' (an id returned by recall)")
        if depth not in ("chunk", "document"):
            return CallError("expand's 'depth' must be 'chunk' or 'document'")
        return CheckedCall(tool, memory_id=memory_id.strip(), depth=depth)
    query = args.get("query")
    if not isinstance(query, str) or not query.strip():
        return CallError(f"{name} needs a non-empty string 'query'")
    return CheckedCall(tool, query=query.strip()[:MAX_QUERY_CHARS])
