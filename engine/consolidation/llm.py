"""The llm consolidation path: the model proposes, the facts decide.

The model sees a batch of new facts of one scope and the existing observations related to
them, and answers with JSON (no tools): creates, updates and deletes, each citing its new
facts with a quote. validate.py checks every proposal against the facts it cites and applies
the accepted ones through store.py and the same near-duplicate merge as the local path, in
the transaction that marks the batch consolidated.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
from numpy.typing import NDArray

from engine.consolidation.candidates import (
    PendingFact,
    pending_facts,
    related_observations,
)
from engine.consolidation.claims import Claim, parse_claim
from engine.consolidation.thresholds import CANDIDATE_FLOOR
from engine.db import Connection
from engine.llm import LLMClient, Usage

# Observations shown per new fact, and in all for one call.
OBSERVATIONS_PER_FACT = 5
MAX_OBSERVATIONS = 30
EVIDENCE_SHOWN = 3

SYSTEM = """You maintain the observations of a memory bank: durable beliefs distilled from \
facts, each resting on the facts that support it. Given NEW FACTS and the EXISTING \
OBSERVATIONS related to them, propose changes:
- creates: a belief that new facts support and no existing observation states. Skip one-off \
events unless the mission asks for them.
- updates: an existing observation the new facts refine, strengthen or contradict. When they \
contradict it, set "contradiction": true and write the new state with the old one as past \
("used to X, now Y"). Otherwise keep its text, or refine it.
- deletes: an observation the new facts show to be wrong, with nothing to replace it.
Never create an observation that restates an existing one: update that one. Never merge \
beliefs about different people. Write plain sentences without ids, dates in parentheses or \
labels.
Every create, update and delete cites new facts in "sources": the fact id exactly as shown \
in brackets, and a short quote copied word for word from that fact's text.
Answer {"creates": [], "updates": [], "deletes": []} when nothing durable is new."""

_SOURCES: dict[str, Any] = {
    "type": "array",
    "items": {
        "type": "object",
        "additionalProperties": False,
        "required": ["fact_id", "quote"],
        "properties": {"fact_id": {"type": "string"}, "quote": {"type": "string"}},
    },
}


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": list(properties),
        "properties": properties,
    }


SCHEMA = _object(
    {
        "creates": {
            "type": "array",
            "items": _object({"text": {"type": "string"}, "sources": _SOURCES}),
        },
        "updates": {
            "type": "array",
            "items": _object(
                {
                    "observation_id": {"type": "string"},
                    "text": {"type": "string"},
                    "reason": {"type": "string"},
                    "contradiction": {"type": "boolean"},
                    "sources": _SOURCES,
                }
            ),
        },
        "deletes": {
            "type": "array",
            "items": _object(
                {
                    "observation_id": {"type": "string"},
                    "reason": {"type": "string"},
                    "sources": _SOURCES,
                }
            ),
        },
    }
)


@dataclass(frozen=True)
class Source:
    fact_id: str
    quote: str


@dataclass(frozen=True)
class CreateProposal:
    text: str
    sources: list[Source]


@dataclass(frozen=True)
class UpdateProposal:
    observation_id: str
    text: str
    reason: str
    contradiction: bool
    sources: list[Source]


@dataclass(frozen=True)
class DeleteProposal:
    observation_id: str
    reason: str
    sources: list[Source]


@dataclass(frozen=True)
class Proposals:
    creates: list[CreateProposal] = field(default_factory=list)
    updates: list[UpdateProposal] = field(default_factory=list)
    deletes: list[DeleteProposal] = field(default_factory=list)
    malformed: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ObservationContext:
    id: str
    text: str
    proof_count: int
    evidence: list[str]
    claim: Claim | None
    event_at: datetime
    created_at: datetime
    embedding: NDArray[np.float32]


@dataclass(frozen=True)
class ScopeGroup:
    scope: list[str]
    facts: list[PendingFact]
    observations: list[ObservationContext]


@dataclass(frozen=True)
class LLMBatch:
    bank_id: str
    mission: str
    groups: list[ScopeGroup]

    @property
    def fact_ids(self) -> list[str]:
        return [f.id for g in self.groups for f in g.facts]


_CONTEXT = """
SELECT m.id::text AS id, m.proof_count,
       coalesce(array(SELECT f.text FROM observation_evidence e JOIN memory_units f
                      ON f.id = e.fact_id
                      WHERE e.observation_id = m.id AND e.stance = 'supports'
                      ORDER BY e.evidence_at DESC NULLS LAST LIMIT $2), '{}') AS evidence
FROM memory_units m WHERE m.id = ANY($1::uuid[])
"""


async def prepare_batch(conn: Connection, bank_id: str, mission: str, limit: int) -> LLMBatch:
    """The oldest waiting facts grouped by scope, each group with its related observations."""
    facts = await pending_facts(conn, bank_id, limit, lock=False)
    by_scope: dict[tuple[str, ...], list[PendingFact]] = {}
    for fact in facts:
        by_scope.setdefault(tuple(fact.scope), []).append(fact)
    groups: list[ScopeGroup] = []
    for scope, members in by_scope.items():
        seen: dict[str, ObservationContext] = {}
        for fact in members:
            for near in await related_observations(
                conn,
                bank_id,
                fact,
                parse_claim(fact.text),
                floor=CANDIDATE_FLOOR,
                limit=OBSERVATIONS_PER_FACT,
            ):
                if near.id not in seen and len(seen) < MAX_OBSERVATIONS:
                    seen[near.id] = ObservationContext(
                        near.id,
                        near.text,
                        0,
                        [],
                        near.claim,
                        near.event_at,
                        near.created_at,
                        near.embedding,
                    )
        rows = await conn.fetch(_CONTEXT, list(seen), EVIDENCE_SHOWN)
        details = {r["id"]: (int(r["proof_count"]), list(r["evidence"])) for r in rows}
        observations = [
            ObservationContext(
                o.id,
                o.text,
                *details.get(o.id, (0, [])),
                o.claim,
                o.event_at,
                o.created_at,
                o.embedding,
            )
            for o in seen.values()
        ]
        groups.append(ScopeGroup(list(scope), members, observations))
    return LLMBatch(bank_id, mission, groups)


def prompt(group: ScopeGroup, mission: str) -> str:
    lines = [f"MISSION: {mission}"] if mission else []
    lines.append("NEW FACTS:")
    for fact in sorted(group.facts, key=lambda f: (f.event_at, f.id)):
        lines.append(f"[{fact.id}] {fact.text} (when: {fact.event_at.date().isoformat()})")
    shown = [
        {"id": o.id, "text": o.text, "proof_count": o.proof_count, "evidence": o.evidence}
        for o in group.observations
    ]
    lines.append("EXISTING OBSERVATIONS:")
    lines.append(json.dumps(shown, ensure_ascii=False))
    return "\n".join(lines)


def _sources(raw: object) -> list[Source] | None:
    if not isinstance(raw, list):
        return None
    sources: list[Source] = []
    for item in raw:
        if not isinstance(item, dict):
            return None
        fact_id, quote = item.get("fact_id"), item.get("quote")
        if not isinstance(fact_id, str) or not isinstance(quote, str):
            return None
        sources.append(Source(fact_id.strip(), quote))
    return sources


def _text(item: dict[str, Any], key: str) -> str | None:
    value = item.get(key)
    return value.strip() if isinstance(value, str) else None


def parse_proposals(data: dict[str, Any]) -> Proposals:
    """The model's answer as proposals; items of the wrong shape are named in `malformed`."""
    creates: list[CreateProposal] = []
    updates: list[UpdateProposal] = []
    deletes: list[DeleteProposal] = []
    malformed: list[str] = []
    for kind in ("creates", "updates", "deletes"):
        items = data.get(kind, [])
        if not isinstance(items, list):
            malformed.append(f"{kind}: not a list")
            continue
        for index, item in enumerate(items):
            where = f"{kind}[{index}]"
            if not isinstance(item, dict):
                malformed.append(f"{where}: not an object")
                continue
            sources = _sources(item.get("sources"))
            text, reason = _text(item, "text"), _text(item, "reason")
            target = _text(item, "observation_id")
            if sources is None:
                malformed.append(f"{where}: sources must be [{{fact_id, quote}}]")
            elif kind == "creates" and text is not None:
                creates.append(CreateProposal(text, sources))
            elif kind == "updates" and text is not None and target is not None:
                contradiction = item.get("contradiction") is True
                updates.append(UpdateProposal(target, text, reason or "", contradiction, sources))
            elif kind == "deletes" and target is not None:
                deletes.append(DeleteProposal(target, reason or "", sources))
            else:
                malformed.append(f"{where}: missing text or observation_id")
    return Proposals(creates, updates, deletes, malformed)


async def propose(llm: LLMClient, group: ScopeGroup, mission: str) -> tuple[Proposals, Usage]:
    data, usage = await llm.complete_json(SYSTEM, prompt(group, mission), "consolidation", SCHEMA)
    return parse_proposals(data), usage
