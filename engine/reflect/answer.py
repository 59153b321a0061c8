"""Pure helpers of the reflect loop: limits, what the answer rests on, the no-model answer."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from typing import Any

from engine.reflect.payloads import Budget, Evidence
from engine.reflect.prompt import Directive
from engine.reflect.search import evidence_for_model

# Model turns with tools before the answer is synthesised without them. A low budget still
# allows the usual mental models → observations → facts descent and a done call.
ITERATIONS: dict[Budget, int] = {"low": 3, "mid": 6, "high": 10}
# Recall's estimate (engine/recall/budget.py): about four characters a token.
CHARS_PER_TOKEN = 4
_CITED = re.compile(r"\[([0-9A-Za-z_.:-]{1,128})\]")

NO_MODEL = (
    "No language model is configured (set ENGRAM_LLM_API_KEY), so reflect cannot reason "
    "over the memories. Below is the evidence it would have reasoned over for the question"
)


def estimate_tokens(messages: Sequence[dict[str, Any]]) -> int:
    return len(json.dumps(messages, ensure_ascii=False)) // CHARS_PER_TOKEN + 1


def directives_of(texts: Iterable[str]) -> list[Directive]:
    """The bank's directives with stable ids (a digest of the text) and a short name."""
    directives = []
    for text in texts:
        content = text.strip()
        if not content:
            continue
        digest = hashlib.sha256(content.encode()).hexdigest()[:16]
        name = content if len(content) <= 60 else content[:57].rstrip() + "..."
        directives.append(Directive(f"directive-{digest}", name, content))
    return directives


def cited_ids(text: str) -> list[str]:
    return list(dict.fromkeys(_CITED.findall(text)))


def rests_on(ids: Sequence[str], seen: dict[str, Evidence]) -> list[Evidence]:
    """The evidence the answer names; everything seen when it names nothing known."""
    named = [seen[i] for i in dict.fromkeys(ids) if i in seen]
    return named or list(seen.values())


def synthesis_prompt(query: str, context: str, seen: Sequence[Evidence], max_tokens: int) -> str:
    """The final call's user message: the question and the evidence, cut to fit."""
    head = f"Question: {query}"
    if context.strip():
        head += f"\n\nContext from the caller: {context.strip()}"
    shown: list[dict[str, Any]] = []
    budget = max_tokens * CHARS_PER_TOKEN - len(head) - 200
    for entry in evidence_for_model(seen):
        size = len(json.dumps(entry, ensure_ascii=False))
        if size > budget:
            break
        shown.append(entry)
        budget -= size
    evidence = json.dumps(shown, ensure_ascii=False, indent=1) if shown else "(none found)"
    return f"{head}\n\nEvidence gathered:\n{evidence}"


def _line(item: Evidence) -> str:
    when = item.occurred_start or item.mentioned_at
    date = f"{when.date().isoformat()}: " if when is not None else ""
    label = f"**{item.name}**: " if item.name else ""
    return f"- {date}{label}{item.text} [{item.id}]"


def no_model_answer(
    query: str,
    mental_models: Sequence[Evidence],
    observations: Sequence[Evidence],
    facts: Sequence[Evidence],
    latest: bool = False,
) -> str:
    """The no-model text: says so, then lists the evidence from the most distilled down;
    `latest`: the question matched nothing, and `facts` are the bank's latest."""
    parts = [f'{NO_MODEL} "{query}".']
    sections = (
        ("Mental models", mental_models),
        ("Observations", observations),
        ("Latest facts" if latest else "Facts", facts),
    )
    if latest or not any(items for _, items in sections):
        parts.append("Nothing in this bank matches the question.")
    if latest and facts:
        parts.append("These are the bank's latest facts instead.")
    for title, items in sections:
        if items:
            parts.append(f"## {title}\n" + "\n".join(_line(item) for item in items))
    return "\n\n".join(parts)
