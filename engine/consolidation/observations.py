"""Reading observations for the API, recall and reflect: evidence, history, sources, status;
and clearing them."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from engine.consolidation.freshness import Trend, freshness_trend
from engine.db import Connection
from engine.errors import InvalidInput, NotFound
from engine.store.backlog import requeue_statement
from engine.store.document_history import record_observations_cleared


@dataclass(frozen=True)
class EvidenceItem:
    fact_id: str
    text: str  # the fact's text
    quote: str
    stance: str
    evidence_at: datetime | None
    added_at: datetime


@dataclass(frozen=True)
class HistoryItem:
    version: int
    change: str  # updated | merged | merged_into | retracted
    previous_text: str
    new_text: str | None
    reason: str
    fact_ids: list[str]
    related_id: str | None
    changed_at: datetime


@dataclass(frozen=True)
class ObservationDetail:
    observation_id: str
    origin: str
    version: int
    proof_count: int
    trend: str  # as stored by the last change
    current_trend: Trend  # as of now
    first_evidence_at: datetime | None
    last_evidence_at: datetime | None
    claim: dict[str, Any] | None
    evidence: list[EvidenceItem]
    history: list[HistoryItem]


@dataclass(frozen=True)
class ConsolidationStatus:
    pending: int  # facts waiting for consolidation
    observations: int
    facts_consolidated: int
    last_consolidated_at: datetime | None
    operation_id: str | None  # the latest consolidation's operation
    operation_status: str | None
    progress: dict[str, Any]


_DETAIL = """
SELECT o.observation_id::text AS id, o.origin, o.version, o.trend, o.first_evidence_at,
       o.last_evidence_at, o.claim, m.proof_count
FROM observations o JOIN memory_units m ON m.id = o.observation_id
WHERE o.observation_id = $1 AND o.bank_id = $2
"""
_EVIDENCE = """
SELECT e.fact_id::text AS fact_id, f.text, e.quote, e.stance, e.evidence_at, e.added_at
FROM observation_evidence e JOIN memory_units f ON f.id = e.fact_id
WHERE e.observation_id = $1
ORDER BY e.stance = 'supports' DESC, e.evidence_at DESC NULLS LAST, e.fact_id
"""
_HISTORY = """
SELECT version, change, previous_text, new_text, reason,
       array(SELECT unnest(fact_ids)::text) AS fact_ids, related_id::text AS related_id,
       changed_at
FROM observation_history WHERE observation_id = $1 AND bank_id = $2
ORDER BY id DESC
"""
_SOURCES = """
SELECT e.observation_id::text AS observation_id,
       array_agg(e.fact_id::text ORDER BY e.evidence_at, e.fact_id) AS fact_ids
FROM observation_evidence e
WHERE e.bank_id = $1 AND e.observation_id = ANY($2::uuid[]) AND e.stance = 'supports'
GROUP BY e.observation_id
"""
_STATUS = """
SELECT
  (SELECT count(*) FROM consolidation_backlog WHERE bank_id = $1) AS pending,
  (SELECT count(*) FROM memory_units WHERE bank_id = $1 AND fact_type = 'observation')
     AS observations,
  (SELECT facts_consolidated FROM consolidation_state WHERE bank_id = $1) AS facts_consolidated,
  (SELECT last_consolidated_at FROM consolidation_state WHERE bank_id = $1)
     AS last_consolidated_at,
  o.operation_id, o.status AS operation_status, o.progress
FROM (SELECT 1) AS one
LEFT JOIN LATERAL (SELECT operation_id, status, progress FROM operations
                   WHERE bank_id = $1 AND kind = 'consolidation'
                   ORDER BY created_at DESC LIMIT 1) o ON true
"""
# Banks with observations on and work waiting: facts on the backlog, or observations that
# lost all their evidence. A bank an import is filling is left to that import, which asks for
# its consolidation when it ends: a sweep in the middle competed with the import for the CPU
# (~80 CPU s over the 10 LoCoMo conversations, bench/import_locomo.py). An import row still
# open after IMPORT_QUIET_HOURS (a workflow an operator terminated, say) no longer holds
# the sweep back.
IMPORT_QUIET_HOURS = 6
_BANKS_WITH_WORK = f"""
SELECT b.bank_id FROM banks b
WHERE coalesce((b.config->>'enable_observations')::boolean, true)
  AND NOT EXISTS (SELECT 1 FROM operations op
                  WHERE op.bank_id = b.bank_id AND op.kind = 'import'
                    AND op.status IN ('pending', 'running')
                    AND op.created_at > now() - interval '{IMPORT_QUIET_HOURS} hours')
  AND (EXISTS (SELECT 1 FROM consolidation_backlog cb WHERE cb.bank_id = b.bank_id)
       OR EXISTS (SELECT 1 FROM observations o WHERE o.bank_id = b.bank_id
                    AND NOT EXISTS (SELECT 1 FROM observation_evidence e
                                    WHERE e.observation_id = o.observation_id
                                      AND e.stance = 'supports')))
ORDER BY b.bank_id
LIMIT $1
"""


def _history(row: asyncpg.Record) -> HistoryItem:
    return HistoryItem(
        version=int(row["version"]),
        change=row["change"],
        previous_text=row["previous_text"],
        new_text=row["new_text"],
        reason=row["reason"],
        fact_ids=list(row["fact_ids"]),
        related_id=row["related_id"],
        changed_at=row["changed_at"],
    )


async def observation_history(
    conn: Connection, bank_id: str, observation_id: str
) -> list[HistoryItem]:
    """Newest first; also for an observation since retracted or merged into another."""
    try:
        rows = await conn.fetch(_HISTORY, observation_id, bank_id)
    except asyncpg.DataError:
        return []
    return [_history(r) for r in rows]


async def observation_detail(
    conn: Connection, bank_id: str, observation_id: str, now: datetime
) -> ObservationDetail:
    try:
        row = await conn.fetchrow(_DETAIL, observation_id, bank_id)
    except asyncpg.DataError as exc:
        raise NotFound("observation", observation_id) from exc
    if row is None:
        raise NotFound("observation", observation_id)
    evidence = [
        EvidenceItem(
            r["fact_id"], r["text"], r["quote"], r["stance"], r["evidence_at"], r["added_at"]
        )
        for r in await conn.fetch(_EVIDENCE, observation_id)
    ]
    times = [e.evidence_at for e in evidence if e.stance == "supports" and e.evidence_at]
    return ObservationDetail(
        observation_id=row["id"],
        origin=row["origin"],
        version=int(row["version"]),
        proof_count=int(row["proof_count"]),
        trend=row["trend"],
        current_trend=freshness_trend(times, now),
        first_evidence_at=row["first_evidence_at"],
        last_evidence_at=row["last_evidence_at"],
        claim=row["claim"],
        evidence=evidence,
        history=await observation_history(conn, bank_id, observation_id),
    )


async def observation_sources(
    conn: Connection, bank_id: str, observation_ids: Sequence[str]
) -> dict[str, list[str]]:
    """Observation id → the ids of the facts that support it (oldest first)."""
    if not observation_ids:
        return {}
    rows = await conn.fetch(_SOURCES, bank_id, list(observation_ids))
    return {r["observation_id"]: list(r["fact_ids"]) for r in rows}


async def consolidation_status(conn: Connection, bank_id: str) -> ConsolidationStatus:
    row = await conn.fetchrow(_STATUS, bank_id)
    assert row is not None
    return ConsolidationStatus(
        pending=int(row["pending"]),
        observations=int(row["observations"]),
        facts_consolidated=int(row["facts_consolidated"] or 0),
        last_consolidated_at=row["last_consolidated_at"],
        operation_id=row["operation_id"],
        operation_status=row["operation_status"],
        progress=dict(row["progress"] or {}),
    )


async def banks_with_work(conn: Connection, limit: int) -> list[str]:
    return [r["bank_id"] for r in await conn.fetch(_BANKS_WITH_WORK, limit)]


_REQUEUE_BANK = requeue_statement("m.bank_id = $1")


async def clear_observations(conn: Connection, bank_id: str) -> int:
    """Delete a bank's observations and their history; its facts go back on the backlog, so
    the next consolidation rebuilds observations from scratch."""
    async with conn.transaction():
        await record_observations_cleared(conn, bank_id, None)
        status = await conn.execute(
            "DELETE FROM memory_units WHERE bank_id = $1 AND fact_type = 'observation'", bank_id
        )
        await conn.execute("DELETE FROM observation_history WHERE bank_id = $1", bank_id)
        await conn.execute(_REQUEUE_BANK, bank_id)
        return int(status.rsplit(" ", 1)[-1])


_FACTS_OBSERVATIONS = """
SELECT DISTINCT e.observation_id FROM observation_evidence e
WHERE e.bank_id = $1 AND e.fact_id = ANY($2::uuid[])
"""
# The retraction is recorded, so the cleared observations keep a history.
_RETRACT_CLEARED = """
INSERT INTO observation_history (bank_id, observation_id, version, change, previous_text,
                                 new_text, reason, fact_ids)
SELECT $1, o.observation_id, o.version + 1, 'retracted', m.text, NULL, $3, $4::uuid[]
FROM observations o JOIN memory_units m ON m.id = o.observation_id
WHERE o.observation_id = ANY($2::uuid[])
"""
_REQUEUE_EVIDENCE = requeue_statement(
    "m.bank_id = $1 AND (m.id = ANY($3::uuid[]) OR m.id IN (SELECT fact_id FROM"
    " observation_evidence WHERE observation_id = ANY($2::uuid[])))"
)


async def _clear_built_from(
    conn: Connection, bank_id: str, facts: list[uuid.UUID], reason: str
) -> list[str]:
    """In the caller's transaction: delete the observations resting on `facts`, put those
    facts and the observations' other evidence back on the backlog, record each retraction."""
    found = [r["observation_id"] for r in await conn.fetch(_FACTS_OBSERVATIONS, bank_id, facts)]
    await record_observations_cleared(conn, bank_id, [str(o) for o in found])
    await conn.execute(_RETRACT_CLEARED, bank_id, found, reason, facts)
    await conn.execute(_REQUEUE_EVIDENCE, bank_id, found, facts)
    await conn.execute("DELETE FROM pending_links WHERE to_unit = ANY($1::uuid[])", found)
    await conn.execute(
        "DELETE FROM memory_units WHERE bank_id = $1 AND id = ANY($2::uuid[])", bank_id, found
    )
    return [str(o) for o in found]


# A consolidation batch may hold the same rows: the loser of a deadlock runs again.
CLEAR_ATTEMPTS = 3


async def _clear_in_transaction(
    conn: Connection, bank_id: str, facts: list[uuid.UUID], reason: str
) -> list[str]:
    for attempt in range(CLEAR_ATTEMPTS):
        try:
            async with conn.transaction():
                return await _clear_built_from(conn, bank_id, facts, reason)
        except asyncpg.DeadlockDetectedError:
            if attempt == CLEAR_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")


async def clear_fact_observations(conn: Connection, bank_id: str, memory_id: str) -> list[str]:
    """Delete the observations built from one fact and put that fact, and the other facts
    those observations rested on, back on the backlog; the fact itself stays. Returns the
    ids of the observations that went (each leaves a 'retracted' line in its history)."""
    try:
        fact_id = uuid.UUID(memory_id)
    except ValueError as exc:
        raise NotFound("memory", memory_id) from exc
    kind = await conn.fetchval(
        "SELECT fact_type FROM memory_units WHERE bank_id = $1 AND id = $2", bank_id, fact_id
    )
    if kind is None:
        raise NotFound("memory", memory_id)
    if kind == "observation":
        raise InvalidInput(
            "memory_id", "is an observation; clear a fact's observations, or DELETE it"
        )
    reason = f"cleared with the observations of memory {memory_id}"
    return await _clear_in_transaction(conn, bank_id, [fact_id], reason)


_RECOUNT_ENTITY = """
UPDATE entities e SET
    mention_count = s.n,
    first_seen = coalesce(s.first, e.first_seen),
    last_seen = coalesce(s.last, e.last_seen)
FROM (SELECT count(*) AS n, min(coalesce(m.occurred_start, m.mentioned_at)) AS first,
             max(coalesce(m.occurred_start, m.mentioned_at)) AS last
      FROM unit_entities ue JOIN memory_units m ON m.id = ue.unit_id
      WHERE ue.entity_id = $2 AND m.fact_type <> 'observation') s
WHERE e.bank_id = $1 AND e.id = $2
"""


async def clear_entity_observations(conn: Connection, bank_id: str, entity_id: str) -> list[str]:
    """Hindsight's entity regeneration, first half: the observations built from the entity's
    facts cleared (their facts back on the backlog) so consolidation rebuilds them, and the
    entity's count and first/last seen recomputed from its facts. Returns the cleared ids."""
    try:
        key = uuid.UUID(entity_id)
    except ValueError as exc:
        raise NotFound("entity", entity_id) from exc
    exists = await conn.fetchval(
        "SELECT 1 FROM entities WHERE bank_id = $1 AND id = $2", bank_id, key
    )
    if exists is None:
        raise NotFound("entity", entity_id)
    facts = [
        r["unit_id"]
        for r in await conn.fetch(
            "SELECT ue.unit_id FROM unit_entities ue JOIN memory_units m ON m.id = ue.unit_id"
            " WHERE ue.entity_id = $1 AND m.fact_type <> 'observation'",
            key,
        )
    ]
    cleared = await _clear_in_transaction(conn, bank_id, facts, f"regenerated entity {entity_id}")
    await conn.execute(_RECOUNT_ENTITY, bank_id, key)
    return cleared
