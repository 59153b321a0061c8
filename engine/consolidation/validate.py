"""Validating the model's consolidation proposals against the facts they cite, and applying
the accepted ones through store.py and the near-duplicate merge, in the caller's transaction.

A proposal is applied only if every fact id it cites is one of the new facts of its group
(facts of other scopes are not in the group, so scopes cannot mix), every quote is found in
the fact it cites, and every observation id is one the model was shown; anything else is
rejected with the reason, and counted.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from engine.consolidation.candidates import PendingFact
from engine.consolidation.claims import parse_claim
from engine.consolidation.encode import TextEncoder
from engine.consolidation.llm import (
    CreateProposal,
    ObservationContext,
    Proposals,
    ScopeGroup,
    Source,
    UpdateProposal,
)
from engine.consolidation.local import Tally
from engine.consolidation.merge import Current, merge_near_duplicates
from engine.consolidation.store import (
    Evidence,
    add_evidence,
    insert_observation,
    refresh_observation,
    retract_observation,
    rewrite_observation,
    supersede_evidence,
)
from engine.db import Connection

MAX_TEXT = 1000
# Rejection reasons kept per batch (the rest are only counted).
MAX_REJECTIONS = 20

_EXISTING = """
SELECT id::text AS id FROM memory_units
WHERE bank_id = $1 AND fact_type = 'observation' AND id = ANY($2::uuid[])
"""


def _normal(text: str) -> str:
    return re.sub(r"\s+", " ", text.casefold()).strip(" \"'“”‘’.,;:!?")


def check_sources(sources: Sequence[Source], facts: dict[str, PendingFact]) -> str | None:
    """Why these citations are unacceptable, or None: unknown fact ids are rejected, and
    each quote must be found in the fact it cites."""
    if not sources:
        return "cites no fact"
    for source in sources:
        fact = facts.get(source.fact_id)
        if fact is None:
            return f"cites unknown fact id {source.fact_id!r}"
        quote = _normal(source.quote)
        if not quote or quote not in _normal(fact.text):
            return f"quote {source.quote!r} is not in fact {source.fact_id}"
    return None


def _check_text(text: str) -> str | None:
    if not text:
        return "empty text"
    if len(text) > MAX_TEXT:
        return f"text longer than {MAX_TEXT} characters"
    return None


@dataclass
class _Applier:
    conn: Connection
    bank_id: str
    encode: TextEncoder
    as_of: datetime
    tally: Tally
    rejections: list[str]
    redirects: dict[str, str] = field(default_factory=dict)  # absorbed → survivor

    def reject(self, what: str, reason: str) -> None:
        self.tally.rejected += 1
        if len(self.rejections) < MAX_REJECTIONS:
            self.rejections.append(f"{what}: {reason}")

    async def merge(self, current: Current) -> None:
        survivor, absorbed = await merge_near_duplicates(
            self.conn, self.bank_id, current, self.as_of
        )
        self.tally.merged += len(absorbed)
        for gone in absorbed:
            self.redirects[gone] = survivor

    def target(self, observation_id: str) -> str:
        while observation_id in self.redirects:
            observation_id = self.redirects[observation_id]
        return observation_id


async def apply_group(
    conn: Connection,
    bank_id: str,
    group: ScopeGroup,
    proposals: Proposals,
    *,
    pending: set[str],
    existing: set[str],
    encoder: TextEncoder,
    as_of: datetime,
    tally: Tally,
    rejections: list[str],
) -> None:
    """Validate and apply one group's proposals (inside the caller's transaction).
    `pending` are the group's facts still waiting, `existing` the observations still there."""
    applier = _Applier(conn, bank_id, encoder, as_of, tally, rejections)
    for problem in proposals.malformed:
        applier.reject("malformed", problem)
    facts = {f.id: f for f in group.facts if f.id in pending}
    shown = {o.id: o for o in group.observations if o.id in existing}
    touched: set[str] = set()

    def check(what: str, sources: Sequence[Source], target: str | None) -> bool:
        problem = check_sources(sources, facts)
        if problem is None and target is not None:
            if target not in shown:
                problem = f"unknown observation id {target!r}"
            elif target in touched:
                problem = f"observation {target} is changed twice"
        if problem is not None:
            applier.reject(what, problem)
            return False
        if target is not None:
            touched.add(target)
        return True

    for index, delete in enumerate(proposals.deletes):
        if not check(f"deletes[{index}]", delete.sources, delete.observation_id):
            continue
        target = applier.target(delete.observation_id)
        await retract_observation(
            conn,
            bank_id,
            target,
            reason=f"contradicted by new facts: {delete.reason}".rstrip(": "),
            fact_ids=[s.fact_id for s in delete.sources],
        )
        existing.discard(target)
        tally.retracted += 1
    for index, update in enumerate(proposals.updates):
        what = f"updates[{index}]"
        empty = _check_text(update.text)
        if empty is not None:
            applier.reject(what, empty)
            continue
        if not check(what, update.sources, update.observation_id):
            continue
        await _apply_update(applier, group.scope, shown[update.observation_id], update, facts)
    for index, create in enumerate(proposals.creates):
        what = f"creates[{index}]"
        empty = _check_text(create.text)
        if empty is not None:
            applier.reject(what, empty)
            continue
        if not check(what, create.sources, None):
            continue
        await _apply_create(applier, group.scope, create, facts)


async def _apply_update(
    applier: _Applier,
    scope: list[str],
    observation: ObservationContext,
    update: UpdateProposal,
    facts: dict[str, PendingFact],
) -> None:
    conn, bank_id = applier.conn, applier.bank_id
    target = applier.target(observation.id)
    evidence = [Evidence(s.fact_id, s.quote.strip()) for s in update.sources]
    if update.contradiction:
        await supersede_evidence(conn, target)
    await add_evidence(conn, bank_id, target, evidence)
    newest = max(facts[s.fact_id].event_at for s in update.sources)
    if update.text != observation.text or update.contradiction:
        claim = parse_claim(update.text)
        encoded = (await applier.encode([update.text]))[0]
        kind = "contradicted by new facts" if update.contradiction else "refined by new facts"
        await rewrite_observation(
            conn,
            bank_id,
            target,
            text=update.text,
            encoded=encoded,
            claim=claim,
            reason=f"{kind}: {update.reason}".rstrip(": "),
            fact_ids=[s.fact_id for s in update.sources],
        )
        await refresh_observation(conn, bank_id, target, applier.as_of)
        applier.tally.updated += 1
        await applier.merge(
            Current(
                target,
                update.text,
                scope,
                encoded.embedding,
                claim,
                max(newest, observation.event_at),
                observation.created_at,
            )
        )
    else:
        await refresh_observation(conn, bank_id, target, applier.as_of)
        applier.tally.reinforced += 1


async def _apply_create(
    applier: _Applier, scope: list[str], create: CreateProposal, facts: dict[str, PendingFact]
) -> None:
    claim = parse_claim(create.text)
    encoded = (await applier.encode([create.text]))[0]
    observation_id = await insert_observation(
        applier.conn,
        applier.bank_id,
        text=create.text,
        scope=scope,
        encoded=encoded,
        claim=claim,
        origin="llm",
        evidence=[Evidence(s.fact_id, s.quote.strip()) for s in create.sources],
        as_of=applier.as_of,
    )
    applier.tally.created += 1
    await applier.merge(
        Current(
            observation_id,
            create.text,
            scope,
            encoded.embedding,
            claim,
            max(facts[s.fact_id].event_at for s in create.sources),
            datetime.now(UTC),
        )
    )


async def existing_observations(conn: Connection, bank_id: str, ids: Sequence[str]) -> set[str]:
    rows = await conn.fetch(_EXISTING, bank_id, list(ids))
    return {r["id"] for r in rows}
