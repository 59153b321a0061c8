"""What consolidation reads: the backlog, and the observations and older facts near a fact.

Scopes are compared as sets (`@>` and `<@`), so a fact only ever meets observations and
facts with exactly its tags. Nearest-first orders are exact (the bank, type and scope filters
are selective); similarity is 1 - cosine distance.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime

import asyncpg
import numpy as np
from numpy.typing import NDArray
from pgvector import Vector

from engine.consolidation.claims import Claim, parse_claim
from engine.db import Connection


@dataclass(frozen=True)
class PendingFact:
    id: str
    text: str
    scope: list[str]  # its tags, sorted and distinct
    entity_ids: list[str]
    mentions: int  # of its entities in all (their mention counts summed)
    embedding: NDArray[np.float32]
    event_at: datetime  # when it happened (or was said, or stored)
    created_at: datetime


@dataclass(frozen=True)
class Neighbour:
    """An observation or an older fact near a fact."""

    id: str
    text: str
    similarity: float
    claim: Claim | None
    event_at: datetime  # an observation's newest supporting evidence, a fact's own time
    created_at: datetime
    embedding: NDArray[np.float32]


# Token vectors are not read with candidates: they are stored out of line (TOAST, ~4 kB a
# fact), and only the one statement an observation reuses needs them, which the new
# observation's insert copies in the database (store.py). Reading them for every pending fact,
# peer and related observation was one TOAST lookup per row, ~70 rows a fact.
_PENDING = """
SELECT m.id::text AS id, m.text, m.tags, m.embedding,
       coalesce(m.occurred_start, m.mentioned_at, m.created_at) AS event_at, m.created_at,
       coalesce(array(SELECT ue.entity_id::text FROM unit_entities ue WHERE ue.unit_id = m.id
                      ORDER BY 1), '{}') AS entity_ids,
       (SELECT coalesce(sum(e.mention_count), 0) FROM unit_entities ue
        JOIN entities e ON e.id = ue.entity_id WHERE ue.unit_id = m.id) AS mentions
FROM consolidation_backlog b JOIN memory_units m ON m.id = b.fact_id
WHERE b.bank_id = $1
ORDER BY b.event_at, b.fact_id
LIMIT $2
"""
# The facts are locked (not their backlog rows): a retain deleting one of them waits for the
# batch. NO KEY UPDATE, not UPDATE: consolidation never changes a fact, and the weaker lock
# lets an upsert insert links to these facts (a foreign-key check takes KEY SHARE) instead of
# waiting for the batch while holding the bank's statistics row, which the batch then waits
# for (LoCoMo import vs. the consolidation sweep: a deadlock every few batches). A retain that
# deletes one of them still waits, as DELETE needs the stronger lock.
_PENDING_LOCKED = _PENDING + " FOR NO KEY UPDATE OF m"
_STILL_PENDING = """
SELECT m.id::text AS id FROM consolidation_backlog b JOIN memory_units m ON m.id = b.fact_id
WHERE b.bank_id = $1 AND b.fact_id = ANY($2::uuid[])
ORDER BY b.event_at, b.fact_id
FOR NO KEY UPDATE OF m
"""
# Then the bank's statistics row, before anything that writes observations or their terms:
# upsert takes its facts' locks, then this row (its fact insert's trigger), then BM25 term
# rows, so taking them in the same order makes the two queue instead of deadlocking.
_LOCK_BANK_STATS = "SELECT 1 FROM bank_stats WHERE bank_id = $1 FOR NO KEY UPDATE"
_BACKLOG = "SELECT count(*) FROM consolidation_backlog WHERE bank_id = $1"

_SHARES_ENTITY = """(
    (cardinality($ENT::uuid[]) = 0
     AND NOT EXISTS (SELECT 1 FROM unit_entities ue WHERE ue.unit_id = m.id))
    OR EXISTS (SELECT 1 FROM unit_entities ue
               WHERE ue.unit_id = m.id AND ue.entity_id = ANY($ENT::uuid[])))"""
IN_SCOPE = "m.tags @> $2::text[] AND m.tags <@ $2::text[]"


def by_key(unit_id: str) -> str:
    """A lateral subquery reading the unit `unit_id` by primary key and nothing else (OFFSET 0:
    no filter from outside is pushed into it, so no partial index of memory_units can serve it
    instead of the key)."""
    return f"SELECT m.* FROM memory_units m WHERE m.id = {unit_id} OFFSET 0"


# Observations related to a fact are found through three indexes instead of measuring every
# observation of the bank (that was the largest cost of the local path and grew with the
# observations: 136 s of a 626 s consolidation of bench/entity_skew.py's 10,000-fact journal,
# 13.6 ms a fact, load ~20): those with the fact's claim (subject and aspect, at any
# distance: observations_claim), those naming one of its entities (unit_entities' (entity,
# unit) index, joined to observations by key), and for a fact without entities those without
# entities. Each candidate is then read by primary key in a lateral subquery (OFFSET 0 keeps it
# one: a join let the planner scan the scope's tags index over every fact of the bank) holding
# nothing but the key (`by_key`), the filter outside it. With the observation's type inside,
# statistics taken before the bank had observations (an import's closing ANALYZE) made the
# planner find each candidate by scanning the observations' scope index, a scan of every
# observation of the bank per candidate (bench/entity_skew.py at 100,000 facts: consolidation
# at ~65 facts/s from ~1,500 observations until autovacuum analysed memory_units).
_RELATED_COLUMNS = """m.id::text AS id, m.text, 1 - (m.embedding <=> $3) AS similarity, o.claim,
           coalesce(o.last_evidence_at, m.created_at) AS event_at, m.created_at, m.embedding,
           m.embedding <=> $3 AS distance"""
_RELATED_FILTER = f"""m.bank_id = $1 AND m.fact_type = 'observation'
      AND m.state = 'active' AND {IN_SCOPE}
      AND ((o.claim->>'subject' = $4 AND o.claim->>'aspect' = $5)
           OR (1 - (m.embedding <=> $3) >= $7 AND {_SHARES_ENTITY.replace("$ENT", "$6")}))"""
_RELATED_OBSERVATIONS = f"""
WITH candidates AS MATERIALIZED (
    SELECT o.observation_id FROM observations o
    WHERE o.bank_id = $1 AND o.claim->>'subject' = $4 AND o.claim->>'aspect' = $5
    UNION
    SELECT ue.unit_id FROM unit_entities ue JOIN observations o ON o.observation_id = ue.unit_id
    WHERE ue.entity_id IN (SELECT e.id FROM entities e
                           WHERE e.id = ANY($6::uuid[]) AND e.mention_count <= $9)
      AND o.bank_id = $1
    UNION
    SELECT unnest($10::uuid[])
    UNION
    SELECT o.observation_id FROM observations o
    WHERE cardinality($6::uuid[]) = 0 AND o.bank_id = $1
      AND NOT EXISTS (SELECT 1 FROM unit_entities ue WHERE ue.unit_id = o.observation_id)
)
SELECT {_RELATED_COLUMNS} FROM candidates c
JOIN observations o ON o.observation_id = c.observation_id
CROSS JOIN LATERAL ({by_key("o.observation_id")}) m
WHERE {_RELATED_FILTER}
ORDER BY distance, id
LIMIT $8
"""
# An entity named by more facts than RELATED_SCAN_MENTIONS is not read through its
# observations (~1 for 7 of its facts on bench/entity_skew.py's journal: ~2,600 for its most
# named person at 100,000 facts, and the batch's related query read them all, 375 ms a batch):
# its observations are looked for among the bank's RELATED_NEAREST nearest observations
# instead (HNSW over observations only, migration 0032), each fact's scan bounded whatever
# the entity's popularity. What this can miss are observations sharing only a popular entity
# and farther than the RELATED_NEAREST nearest: the local path never relates to those (relate()
# needs JOIN_SIMILARITY or the same subject and aspect, and the claim arm above is exact), the
# LLM path sees nearer ones in their place.
RELATED_SCAN_MENTIONS = 400
# A batch of 64 facts of the 10,000-fact journal (29 naming a popular person), warm, load ~6:
# 200 nearest 55 ms and ~100 observations kept a fact, 100: 24 ms, 64: 15 ms and ~33 kept
# (about the RELATED_OBSERVATIONS + MARGIN the ranking needs), 40: 10 ms.
RELATED_NEAREST = 64
_NEAREST_RELATED = """
WITH f AS MATERIALIZED (
    SELECT b.id, m.embedding, m.tags,
           array(SELECT ue.entity_id FROM unit_entities ue JOIN entities e ON e.id = ue.entity_id
                 WHERE ue.unit_id = m.id AND e.mention_count > $3) AS popular
    FROM unnest($2::uuid[]) AS b(id) JOIN memory_units m ON m.id = b.id AND m.bank_id = $1
)
SELECT f.id::text AS fact_id, n.id AS observation_id FROM f
CROSS JOIN LATERAL (
    SELECT m.id FROM (
        SELECT m.id, m.tags, m.state, m.embedding <=> f.embedding AS distance
        FROM memory_units m
        WHERE m.bank_id = $1 AND m.fact_type = 'observation'
        ORDER BY m.embedding <=> f.embedding
        LIMIT $4
    ) m
    WHERE m.tags @> f.tags AND m.tags <@ f.tags AND m.state = 'active' AND 1 - m.distance >= $5
      -- by the observation's key: as a semi-join the planner read every mention of the
      -- popular entities for each observation (1,110 rows a probe, 200 ms a batch)
      AND array(SELECT ue.entity_id FROM unit_entities ue WHERE ue.unit_id = m.id) && f.popular
) n
WHERE cardinality(f.popular) > 0
"""
# The local path takes the fact off the backlog in the same statement (one round trip less
# a fact; under load a round trip cost ~4 ms, more than most of these statements): the fact is
# never its own candidate, and the mark commits or rolls back with the batch either way.
_MARK_FACT = """marked AS (
    DELETE FROM consolidation_backlog WHERE fact_id = $11::uuid
),"""
_RELATED_MARKING = _RELATED_OBSERVATIONS.replace("WITH ", f"WITH {_MARK_FACT}\n", 1)

# Nearest first, or about the same subject and aspect at any distance. The near ones are
# looked for among the bank's MERGE_NEAREST nearest observations (HNSW over observations
# only, migration 0032), the others through observations_claim: ordering every observation of
# the scope by distance cost 19 ms a call at 100,000 facts (10,000 observations) and grew with
# them. What the scan can miss: observations of the scope at the floor or nearer that are not
# among the bank's MERGE_NEAREST nearest (as many nearer ones in other scopes, or archived).
MERGE_NEAREST = 40
_NEAR_OBSERVATIONS = f"""
WITH near AS MATERIALIZED (
    SELECT m.id FROM memory_units m
    WHERE m.bank_id = $1 AND m.fact_type = 'observation'
    ORDER BY m.embedding <=> $3
    LIMIT $9
), candidates AS MATERIALIZED (
    SELECT id FROM near
    UNION
    SELECT o.observation_id FROM observations o
    WHERE o.bank_id = $1 AND o.claim->>'subject' = $6 AND o.claim->>'aspect' = $7
)
SELECT {_RELATED_COLUMNS} FROM candidates c
JOIN observations o ON o.observation_id = c.id
CROSS JOIN LATERAL ({by_key("c.id")}) m
WHERE m.bank_id = $1 AND m.fact_type = 'observation' AND {IN_SCOPE}
  AND m.state = 'active' AND m.id <> $4::uuid
  AND (1 - (m.embedding <=> $3) >= $5
       OR (o.claim->>'subject' = $6 AND o.claim->>'aspect' = $7))
ORDER BY distance, id
LIMIT $8
"""

# Index tuples a bounded nearest scan (nearest_scan) may visit looking for the bank's nearest
# (other banks' facts share the index); pgvector's default is 20,000.
PEER_SCAN_TUPLES = 2000
# The settings as they were, then the scan's (one round trip: the materialised CTE is read
# before the outer list sets anything).
_SCAN_SAVE_AND_SET = """
WITH saved AS MATERIALIZED (
    SELECT current_setting('hnsw.ef_search', true) AS ef,
           current_setting('hnsw.iterative_scan', true) AS scan,
           current_setting('hnsw.max_scan_tuples', true) AS tuples,
           current_setting('enable_sort') AS sort
)
SELECT saved.*, set_config('hnsw.ef_search', $1, true),
       set_config('hnsw.iterative_scan', 'strict_order', true),
       set_config('hnsw.max_scan_tuples', $2, true), set_config('enable_sort', 'off', true)
FROM saved
"""
# strict_order: the scan returns rows in distance order while it looks further for rows of
# the bank (pgvector >= 0.8); no sort, so the planner walks the index rather than measuring
# the whole bank (as engine/retain/links.py does for the same reason). SET LOCAL, restored
# after the query.
_SCAN_SET = (
    "SELECT set_config('hnsw.ef_search', $1, true),"
    " set_config('hnsw.iterative_scan', $2, true),"
    " set_config('hnsw.max_scan_tuples', $3, true),"
    " set_config('enable_sort', $4, true)"
)


def scope_of(tags: Sequence[str]) -> list[str]:
    return sorted(set(tags))


def vector(row: asyncpg.Record) -> NDArray[np.float32]:
    return np.asarray(row["embedding"].to_numpy(), dtype=np.float32)


def _pending(row: asyncpg.Record) -> PendingFact:
    return PendingFact(
        id=row["id"],
        text=row["text"],
        scope=scope_of(row["tags"]),
        entity_ids=list(row["entity_ids"]),
        mentions=int(row["mentions"]),
        embedding=vector(row),
        event_at=row["event_at"],
        created_at=row["created_at"],
    )


def neighbour(row: asyncpg.Record, parse: bool) -> Neighbour:
    stored = row["claim"]
    claim = Claim.from_json(stored) if stored else (parse_claim(row["text"]) if parse else None)
    return Neighbour(
        id=row["id"],
        text=row["text"],
        similarity=float(row["similarity"]),
        claim=claim,
        event_at=row["event_at"],
        created_at=row["created_at"],
        embedding=vector(row),
    )


async def pending_facts(
    conn: Connection, bank_id: str, limit: int, *, lock: bool
) -> list[PendingFact]:
    """The facts waiting for consolidation that happened first; `lock` holds them until the
    transaction ends (a retain deleting one of them waits for it)."""
    rows = await conn.fetch(_PENDING_LOCKED if lock else _PENDING, bank_id, limit)
    if lock:
        await conn.execute(_LOCK_BANK_STATS, bank_id)
    return [_pending(r) for r in rows]


async def still_pending(conn: Connection, bank_id: str, fact_ids: Sequence[str]) -> set[str]:
    """Which of `fact_ids` still wait (locked until the transaction ends)."""
    rows = await conn.fetch(_STILL_PENDING, bank_id, list(fact_ids))
    await conn.execute(_LOCK_BANK_STATS, bank_id)
    return {r["id"] for r in rows}


async def backlog(conn: Connection, bank_id: str) -> int:
    return int(await conn.fetchval(_BACKLOG, bank_id))


async def related_observations(
    conn: Connection,
    bank_id: str,
    fact: PendingFact,
    claim: Claim | None,
    *,
    floor: float,
    limit: int,
    mark: bool = False,
) -> list[Neighbour]:
    """Observations of the fact's scope about the same subject and aspect, or sharing an
    entity with it at `floor` similarity or more (a popular entity's among the bank's nearest
    observations); nearest first. `mark` also takes the fact off the backlog (in the caller's
    transaction)."""
    nearest = await nearest_related(conn, bank_id, [fact], floor=floor)
    args = (
        bank_id,
        fact.scope,
        Vector(fact.embedding),
        claim.subject if claim else None,
        claim.aspect if claim else None,
        fact.entity_ids,
        floor,
        limit,
        RELATED_SCAN_MENTIONS,
        [observation_id for _, observation_id in nearest],
    )
    if mark:
        rows = await conn.fetch(_RELATED_MARKING, *args, fact.id)
    else:
        rows = await conn.fetch(_RELATED_OBSERVATIONS, *args)
    return [neighbour(r, parse=False) for r in rows]


async def nearest_related(
    conn: Connection,
    bank_id: str,
    facts: Sequence[PendingFact],
    *,
    floor: float,
    nearest: int = RELATED_NEAREST,
) -> list[tuple[str, str]]:
    """(fact, observation) pairs: the observations among the bank's `nearest` nearest to
    each fact that name one of its popular entities (RELATED_SCAN_MENTIONS), in its scope,
    at `floor` similarity or more. Run inside a transaction."""
    # a fact's mentions are its entities' summed: none of them is popular when that is not
    ids = [f.id for f in facts if f.mentions > RELATED_SCAN_MENTIONS]
    if not ids:
        return []
    async with nearest_scan(conn, nearest):
        rows = await conn.fetch(
            _NEAREST_RELATED, bank_id, ids, RELATED_SCAN_MENTIONS, nearest, floor
        )
    return [(r["fact_id"], str(r["observation_id"])) for r in rows]


async def near_observations(
    conn: Connection,
    bank_id: str,
    scope: Sequence[str],
    embedding: NDArray[np.float32],
    claim: Claim | None,
    *,
    exclude: str,
    floor: float,
    limit: int,
) -> list[Neighbour]:
    """Other observations of the scope at `floor` similarity or more (among the bank's
    MERGE_NEAREST nearest), or with a claim on the same subject and aspect; nearest first.
    Run inside a transaction."""
    async with nearest_scan(conn, MERGE_NEAREST):
        rows = await conn.fetch(
            _NEAR_OBSERVATIONS,
            bank_id,
            list(scope),
            Vector(embedding),
            exclude,
            floor,
            claim.subject if claim else None,
            claim.aspect if claim else None,
            limit,
            MERGE_NEAREST,
        )
    return [neighbour(r, parse=False) for r in rows]


@asynccontextmanager
async def nearest_scan(conn: Connection, nearest: int) -> AsyncIterator[None]:
    """The HNSW settings of a bounded nearest-first scan (`_SCAN_SET`), restored after."""
    saved = await conn.fetchrow(_SCAN_SAVE_AND_SET, str(nearest), str(PEER_SCAN_TUPLES))
    assert saved is not None
    try:
        yield
    finally:
        # pgvector's defaults where its settings were not defined yet in this session
        await conn.execute(
            _SCAN_SET,
            saved["ef"] or "40",
            saved["scan"] or "off",
            saved["tuples"] or "20000",
            saved["sort"],
        )
