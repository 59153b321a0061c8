"""Writing observations: create, add evidence, revise, retract, absorb a near-duplicate.

Both consolidation paths (local and llm) write only through these functions, inside the
transaction that also marks their facts consolidated. An observation is a memory_units row
like any fact, so each write keeps what recall reads in step: the embedding and token vectors,
the BM25 terms (`memory_terms`, `token_count`, and `bank_stats.total_terms` on a rewrite: the
statistics triggers only see inserts and deletes), the tags scope and the entity links (the
entities of its supporting facts).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from pgvector import Vector

from engine.consolidation.claims import Claim
from engine.consolidation.encode import EncodedText
from engine.consolidation.freshness import Trend, freshness_trend
from engine.db import Connection
from engine.errors import NotFound
from engine.lifecycle.access_state import folding
from engine.store.backlog import take_off_backlog
from engine.text import term_frequencies

Stance = Literal["supports", "superseded", "contradicts"]
Change = Literal["updated", "merged", "merged_into", "retracted"]
Origin = Literal["local", "llm"]


@dataclass(frozen=True)
class Evidence:
    fact_id: str
    quote: str
    stance: Stance = "supports"


@dataclass(frozen=True)
class PriorVersion:
    """A version the observation had before it was stored (a superseded older fact)."""

    text: str
    reason: str
    fact_ids: list[str]


# A new observation: its unit, BM25 terms and observations row in one round trip (the foreign
# keys are checked at the end of the statement, when the unit is there). An observation
# stating a fact's text takes that fact's token vectors ($13) here: reading them first was
# a round trip and a ~4 kB blob each way, for one new observation in ten facts.
_INSERT_NEW = """
WITH unit AS (
    INSERT INTO memory_units (id, bank_id, fact_type, text, tags, proof_count, embedding,
                              token_count, token_vectors)
    VALUES ($1, $2, 'observation', $3, $4::text[], 0, $5, $6,
            coalesce($7, (SELECT f.token_vectors FROM memory_units f
                          WHERE f.id = $13::uuid AND f.bank_id = $2)))
), terms AS (
    INSERT INTO memory_terms (bank_id, term, unit_id, tf)
    SELECT $2, t.term, $1, t.tf FROM unnest($8::text[], $9::int[]) AS t(term, tf)
)
INSERT INTO observations (observation_id, bank_id, origin, version, claim)
VALUES ($1, $2, $10, $11, $12)
"""
_TERMS = """
INSERT INTO memory_terms (bank_id, term, unit_id, tf)
SELECT $1, t.term, $2, t.tf FROM unnest($3::text[], $4::int[]) AS t(term, tf)
"""
_EVIDENCE = """
INSERT INTO observation_evidence (observation_id, fact_id, bank_id, quote, stance, evidence_at)
SELECT $1, f.id, $2, e.quote, e.stance, coalesce(f.occurred_start, f.mentioned_at, f.created_at)
FROM unnest($3::uuid[], $4::text[], $5::text[]) AS e(fact_id, quote, stance)
JOIN memory_units f ON f.id = e.fact_id AND f.bank_id = $2
ON CONFLICT (observation_id, fact_id)
DO UPDATE SET stance = EXCLUDED.stance, quote = EXCLUDED.quote
"""
_SUPERSEDE = """
UPDATE observation_evidence SET stance = 'superseded'
WHERE observation_id = $1 AND stance = 'supports'
"""
_HISTORY = """
INSERT INTO observation_history (bank_id, observation_id, version, change, previous_text,
                                 new_text, reason, fact_ids, related_id)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8::uuid[], $9)
"""
_CURRENT = """
SELECT m.text, m.token_count, o.version FROM memory_units m
JOIN observations o ON o.observation_id = m.id
WHERE m.id = $1 AND m.bank_id = $2
FOR UPDATE OF m
"""
_REWRITE_UNIT = """
UPDATE memory_units SET text = $2, embedding = $3, token_vectors = $4, token_count = $5,
                        updated_at = now()
WHERE id = $1
"""
_REWRITE_OBSERVATION = """
UPDATE observations SET version = version + 1, claim = $2 WHERE observation_id = $1
"""
_TOTAL_TERMS = "UPDATE bank_stats SET total_terms = total_terms + $2 WHERE bank_id = $1"
# New evidence and what follows from an observation's supporting evidence, in one statement
# (it was seven round trips a fact on the local path's reinforcement step): the unit's proof
# count, time range and importance, and its entity links (the entities of its supporting
# facts: those no supporting fact names any more dropped, new ones added). The
# sub-statements see the snapshot from before the insert, so the evidence afterwards is the
# stored rows the insert did not touch plus what it returned (a refresh inserts nothing);
# they touch disjoint rows. The evidence times come back for the freshness trend, which is
# computed in Python; the first and last of them are written here (the trend's own update
# was one more round trip a reinforcement: 61,540 at 100,000 facts, see `Trends`).
_REINFORCE = (
    "WITH "
    + folding("$2", "fact_id = $1")
    + """, written AS (
    INSERT INTO observation_evidence AS e (observation_id, fact_id, bank_id, quote, stance,
                                           evidence_at)
    SELECT $1, f.id, $2, n.quote, n.stance,
           coalesce(f.occurred_start, f.mentioned_at, f.created_at)
    FROM unnest($3::uuid[], $4::text[], $5::text[]) AS n(fact_id, quote, stance)
    JOIN memory_units f ON f.id = n.fact_id AND f.bank_id = $2
    ON CONFLICT (observation_id, fact_id)
    DO UPDATE SET stance = EXCLUDED.stance, quote = EXCLUDED.quote
    RETURNING e.fact_id, e.stance, e.evidence_at
), evidence AS (
    SELECT e.fact_id, e.stance, e.evidence_at FROM observation_evidence e
    WHERE e.observation_id = $1 AND e.fact_id NOT IN (SELECT fact_id FROM written)
    UNION ALL
    SELECT fact_id, stance, evidence_at FROM written
), support AS (
    SELECT count(*)::int AS n, min(f.occurred_start) AS occurred_start,
           max(coalesce(f.occurred_end, f.occurred_start)) AS occurred_end,
           max(f.mentioned_at) AS mentioned_at, max(f.importance) AS importance,
           coalesce(array_agg(e.evidence_at ORDER BY e.evidence_at)
                    FILTER (WHERE e.evidence_at IS NOT NULL), '{}') AS times
    FROM evidence e JOIN memory_units f ON f.id = e.fact_id
    WHERE e.stance = 'supports'
), named AS (
    SELECT DISTINCT fe.entity_id FROM evidence e
    JOIN unit_entities fe ON fe.unit_id = e.fact_id
    WHERE e.stance = 'supports'
), unit AS (
    UPDATE memory_units u SET proof_count = s.n, occurred_start = s.occurred_start,
                              occurred_end = s.occurred_end, mentioned_at = s.mentioned_at,
                              updated_at = now(),
                              -- an observation is as important as its most important evidence
                              importance = coalesce(s.importance, u.importance),
                              -- recall's pending accesses folded in first (access_state.py)
                              access_count = u.access_count
                                             + coalesce((SELECT accesses FROM folded), 0),
                              last_accessed_at = greatest(u.last_accessed_at,
                                  (SELECT last_accessed_at FROM folded)),
                              strength = greatest(
                                  coalesce(1 - (1 - u.strength) * (SELECT keep FROM folded),
                                           u.strength),
                                  coalesce(s.importance, u.importance))
    FROM support s
    WHERE u.id = $1
), dropped AS (
    DELETE FROM unit_entities ue
    WHERE ue.unit_id = $1 AND ue.entity_id NOT IN (SELECT entity_id FROM named)
), added AS (
    INSERT INTO unit_entities (unit_id, entity_id, bank_id)
    SELECT $1::uuid, entity_id, $2 FROM named
    ON CONFLICT DO NOTHING
), span AS (
    UPDATE observations SET first_evidence_at = s.times[1],
                            last_evidence_at = s.times[cardinality(s.times)]
    FROM support s
    WHERE observation_id = $1
)
SELECT n, times, array(SELECT entity_id::text FROM named ORDER BY 1) AS entity_ids FROM support
"""
)
_TREND = "UPDATE observations SET trend = $2 WHERE observation_id = $1"
_TRENDS = """
UPDATE observations o SET trend = t.trend
FROM unnest($1::uuid[], $2::text[]) AS t(observation_id, trend)
WHERE o.observation_id = t.observation_id
"""
_ABSORB_EVIDENCE = """
INSERT INTO observation_evidence (observation_id, fact_id, bank_id, quote, stance, evidence_at,
                                  added_at)
SELECT $1, fact_id, bank_id, quote, coalesce($3, stance), evidence_at, added_at
FROM observation_evidence WHERE observation_id = $2
ON CONFLICT (observation_id, fact_id) DO NOTHING
"""


async def _store_terms(conn: Connection, bank_id: str, unit_id: str, text: str) -> int:
    tf, length = term_frequencies(text)
    await conn.execute(_TERMS, bank_id, unit_id, list(tf), list(tf.values()))
    return length


async def _history(
    conn: Connection,
    bank_id: str,
    observation_id: str,
    version: int,
    change: Change,
    previous_text: str,
    new_text: str | None,
    reason: str,
    fact_ids: Sequence[str],
    related_id: str | None = None,
) -> None:
    await conn.execute(
        _HISTORY,
        bank_id,
        observation_id,
        version,
        change,
        previous_text,
        new_text,
        reason,
        list(fact_ids),
        related_id,
    )


async def insert_observation(
    conn: Connection,
    bank_id: str,
    *,
    text: str,
    scope: Sequence[str],
    encoded: EncodedText,
    claim: Claim | None,
    origin: Origin,
    evidence: Sequence[Evidence],
    as_of: datetime,
    prior: PriorVersion | None = None,
    tokens_of: str | None = None,
    trends: Trends | None = None,
) -> str:
    """A new observation with its evidence; `prior` records the belief it replaces; without
    token vectors in `encoded`, those stored for the unit `tokens_of` (its text)."""
    observation_id = str(uuid.uuid4())
    tf, length = term_frequencies(text)
    version = 1 if prior is None else 2
    await conn.execute(
        _INSERT_NEW,
        observation_id,
        bank_id,
        text,
        list(scope),
        Vector(encoded.embedding),
        length,
        encoded.token_vectors,
        list(tf),
        list(tf.values()),
        origin,
        version,
        claim.to_json() if claim else None,
        tokens_of,
    )
    if prior is not None:
        await _history(
            conn,
            bank_id,
            observation_id,
            1,
            "updated",
            prior.text,
            text,
            prior.reason,
            prior.fact_ids,
        )
    await reinforce_observation(conn, bank_id, observation_id, evidence, as_of, trends=trends)
    return observation_id


async def add_evidence(
    conn: Connection, bank_id: str, observation_id: str, evidence: Sequence[Evidence]
) -> None:
    if not evidence:
        return
    await conn.execute(
        _EVIDENCE,
        observation_id,
        bank_id,
        [e.fact_id for e in evidence],
        [e.quote for e in evidence],
        [e.stance for e in evidence],
    )


async def supersede_evidence(conn: Connection, observation_id: str) -> None:
    """The current version's evidence now supports an earlier version only."""
    await conn.execute(_SUPERSEDE, observation_id)


async def rewrite_observation(
    conn: Connection,
    bank_id: str,
    observation_id: str,
    *,
    text: str,
    encoded: EncodedText,
    claim: Claim | None,
    reason: str,
    fact_ids: Sequence[str],
) -> None:
    """New text for an observation; the previous one goes to its history with the reason."""
    current = await conn.fetchrow(_CURRENT, observation_id, bank_id)
    if current is None:
        raise NotFound("observation", observation_id)
    await _history(
        conn,
        bank_id,
        observation_id,
        int(current["version"]),
        "updated",
        current["text"],
        text,
        reason,
        fact_ids,
    )
    await conn.execute("DELETE FROM memory_terms WHERE unit_id = $1", observation_id)
    length = await _store_terms(conn, bank_id, observation_id, text)
    await conn.execute(
        _REWRITE_UNIT,
        observation_id,
        text,
        Vector(encoded.embedding),
        encoded.token_vectors,
        length,
    )
    await conn.execute(_TOTAL_TERMS, bank_id, length - int(current["token_count"]))
    await conn.execute(_REWRITE_OBSERVATION, observation_id, claim.to_json() if claim else None)


async def retract_observation(
    conn: Connection,
    bank_id: str,
    observation_id: str,
    *,
    reason: str,
    fact_ids: Sequence[str],
    change: Change = "retracted",
    related_id: str | None = None,
) -> None:
    """Remove an observation; its history keeps the last text and why it went."""
    current = await conn.fetchrow(_CURRENT, observation_id, bank_id)
    if current is None:
        raise NotFound("observation", observation_id)
    await _history(
        conn,
        bank_id,
        observation_id,
        int(current["version"]),
        change,
        current["text"],
        None,
        reason,
        fact_ids,
        related_id,
    )
    await conn.execute("DELETE FROM memory_units WHERE id = $1", observation_id)


async def absorb_observation(
    conn: Connection,
    bank_id: str,
    survivor: str,
    absorbed: str,
    *,
    reason: str,
    stance: Stance | None,
    as_of: datetime,
    trends: Trends | None = None,
) -> None:
    """Fold `absorbed` into `survivor`: its evidence moves over (as `stance` when given),
    both histories say so, and `absorbed` is removed."""
    await conn.execute(_ABSORB_EVIDENCE, survivor, absorbed, stance)
    current = await conn.fetchrow(_CURRENT, survivor, bank_id)
    if current is None:
        raise NotFound("observation", survivor)
    gone = await conn.fetchrow(_CURRENT, absorbed, bank_id)
    if gone is None:
        raise NotFound("observation", absorbed)
    await _history(
        conn,
        bank_id,
        survivor,
        int(current["version"]),
        "merged",
        current["text"],
        current["text"],
        f"{reason}: absorbed “{gone['text']}”",
        [],
        absorbed,
    )
    await retract_observation(
        conn,
        bank_id,
        absorbed,
        reason=reason,
        fact_ids=[],
        change="merged_into",
        related_id=survivor,
    )
    await refresh_observation(conn, bank_id, survivor, as_of, trends=trends)


async def refresh_observation(
    conn: Connection,
    bank_id: str,
    observation_id: str,
    as_of: datetime,
    *,
    trends: Trends | None = None,
) -> int:
    """Recompute what follows from the supporting evidence (proof count, time range,
    freshness, entity links); returns the proof count."""
    refreshed = await reinforce_observation(conn, bank_id, observation_id, [], as_of, trends=trends)
    return refreshed.proof_count


@dataclass(frozen=True)
class Refreshed:
    """What an observation's supporting evidence is after a write."""

    proof_count: int
    evidence_at: list[datetime]  # oldest first
    entity_ids: list[str]  # the entities its supporting facts name


class Trends:
    """Freshness trends computed during a batch and written together at its end (`write`),
    in the batch's transaction: one statement for the batch instead of one round trip per
    change. Nothing in a batch reads an observation's trend back, so the deferred writes
    leave the same rows as immediate ones (the last trend computed for an observation wins,
    as the last update did)."""

    def __init__(self) -> None:
        self._pending: dict[str, Trend] = {}

    def note(self, observation_id: str, trend: Trend) -> None:
        self._pending[observation_id] = trend

    async def write(self, conn: Connection) -> None:
        if not self._pending:
            return
        ids, trends = list(self._pending), list(self._pending.values())
        await conn.execute(_TRENDS, ids, trends)
        self._pending = {}


async def reinforce_observation(
    conn: Connection,
    bank_id: str,
    observation_id: str,
    evidence: Sequence[Evidence],
    as_of: datetime,
    *,
    trends: Trends | None = None,
) -> Refreshed:
    """`add_evidence` then `refresh_observation`: one statement, and the trend's update (or
    noted in `trends`, for the caller to write); recall's pending accesses of the
    observation are folded in by the same statement, before its strength is raised."""
    support = await conn.fetchrow(
        _REINFORCE,
        observation_id,
        bank_id,
        [e.fact_id for e in evidence],
        [e.quote for e in evidence],
        [e.stance for e in evidence],
    )
    assert support is not None
    times: list[datetime] = list(support["times"])
    trend = freshness_trend(times, as_of)
    if trends is None:
        await conn.execute(_TREND, observation_id, trend)
    else:
        trends.note(observation_id, trend)
    return Refreshed(int(support["n"]), times, list(support["entity_ids"]))


async def mark_consolidated(conn: Connection, fact_ids: Sequence[str]) -> None:
    """The facts are consolidated: off the backlog (memory_units is not written)."""
    await take_off_backlog(conn, fact_ids)
