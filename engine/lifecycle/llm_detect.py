"""Supersession, `llm` path: ask the model which stored facts a new fact replaces.

The model sees the new fact and up to CANDIDATES stored active facts that may share its
subject (the same candidates as the local rules: sharing an entity, or, naming none, the
bank's unattributed facts), each under a short label. Its answer is validated against what
it was shown: a label it was not given, the new fact itself, or a candidate newer than the
new fact is dropped, so the model can only ever supersede facts it was asked about. The rest
is applied like a local supersession (engine/lifecycle/supersession.py).

The retain pipeline calls it after the upsert, as an activity of its own (an LLM call cannot
sit inside the upsert transaction; workflows/pipeline.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine.db import Connection
from engine.lifecycle.detect import NEW_FACTS, SHARING, UNNAMED
from engine.lifecycle.supersession import Supersession, supersede
from engine.llm import LLMClient

CANDIDATES = 20

SYSTEM_PROMPT = """\
You maintain a long-term memory. A new fact has arrived. Decide which of the stored facts it \
replaces: a stored fact is replaced when the new fact states a newer value of the same \
attribute of the same subject (a new employer, city, preference, status or number), or says \
the stored fact no longer holds. Facts that merely add detail, or are about something else, \
are not replaced. Answer with JSON only: {"superseded": [{"label": "F2", "reason": "..."}]}, \
an empty list when nothing is replaced."""

SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["superseded"],
    "properties": {
        "superseded": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["label", "reason"],
                "properties": {"label": {"type": "string"}, "reason": {"type": "string"}},
            },
        }
    },
}


def build_prompt(
    new_text: str, candidates: Sequence[tuple[str, str]]
) -> tuple[str, dict[str, str]]:
    """The user prompt and label -> fact id (labels F1..Fn, never the ids themselves)."""
    labels = {f"F{i + 1}": fact_id for i, (fact_id, _) in enumerate(candidates)}
    lines = [f"New fact: {new_text}", "", "Stored facts:"]
    lines += [f"{label}: {text}" for label, (_, text) in zip(labels, candidates, strict=True)]
    return "\n".join(lines), labels


def validated(answer: dict[str, Any], labels: dict[str, str]) -> list[tuple[str, str]]:
    """(fact id, reason) for every label the model cited that it was shown, once each."""
    chosen: dict[str, str] = {}
    items = answer.get("superseded")
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        label = str(item.get("label", "")).strip()
        if label in labels and labels[label] not in chosen:
            chosen[labels[label]] = str(item.get("reason", ""))[:300]
    return list(chosen.items())


async def apply_llm_supersession(
    conn: Connection, llm: LLMClient, bank_id: str, new_ids: Sequence[str]
) -> list[Supersession]:
    """Ask about each new fact and apply what survives validation."""
    applied: list[Supersession] = []
    rows = await conn.fetch(NEW_FACTS, bank_id, list(new_ids))
    fresh = {str(i) for i in new_ids}
    for new in sorted(rows, key=lambda r: (r["start"], r["id"])):
        if new["entities"]:
            found = await conn.fetch(SHARING, bank_id, new["entities"], [new["id"]], CANDIDATES)
        else:
            found = await conn.fetch(UNNAMED, bank_id, [new["id"]], CANDIDATES)
        # Facts stored by the same write are not asked about: the extractor saw them
        # together, and the local rules already ordered them in the upsert.
        candidates = [
            (r["id"], r["text"])
            for r in found
            if r["start"] <= new["start"] and r["id"] not in fresh
        ]
        if not candidates:
            continue
        prompt, labels = build_prompt(new["text"], candidates)
        answer, _ = await llm.complete_json(SYSTEM_PROMPT, prompt, "supersession", SCHEMA)
        for fact_id, reason in validated(answer, labels):
            change = Supersession(fact_id, new["id"], f"llm: {reason}" if reason else "llm")
            async with conn.transaction():
                if await supersede(conn, bank_id, change):
                    applied.append(change)
    return applied
