"""Step 5: link each staged fact to related facts (semantic, temporal, entity, causal).

Links go to facts already stored in the bank and to staged facts of the same document (they
are stored in the same transaction). Fan-out is bounded per fact and per type.

One activity call links a batch: one query per link type for the whole batch (stored
neighbours), then the comparisons with facts still in flight as numpy array operations in the
CPU pool, with no database connection held meanwhile. Before this, a query per fact and type
plus Python loops over every in-flight peer made linking the slowest step of a bulk import
(14 turns/s on LoCoMo).

Weights, all in (0, 1]:
- semantic: the cosine similarity, kept when >= SEMANTIC_MIN (nearest SEMANTIC_K).
- temporal: exp(-|dt| / TEMPORAL_TAU) over event time (occurred, else mentioned), for facts
  within TEMPORAL_WINDOW (nearest TEMPORAL_K).
- entity: 1 / ln(e + n) for an entity mentioned by n facts, so rare entities link strongly and
  a name on every fact (the user) barely at all; the most recent ENTITY_K facts per entity.
- causal: 1.0, from the extractor's relations inside one chunk.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial

import asyncpg
import numpy as np
from numpy.typing import NDArray

from engine.db import Connection, Pool
from engine.retain.payloads import LinkOptions

SEMANTIC_K = 5
SEMANTIC_MIN = 0.7
TEMPORAL_K = 5
TEMPORAL_WINDOW = timedelta(days=7)
TEMPORAL_TAU_DAYS = 2.0
ENTITY_K = 5
MAX_LINKS_PER_FACT = 20


@dataclass(frozen=True)
class Link:
    to_unit: str
    link_type: str
    weight: float


_STAGED = """
SELECT fact_id::text, document_id, chunk_id, embedding, entity_ids::text[] AS entity_ids,
       fact->'causes' AS causes, (fact->'_chunk'->>'index')::int AS idx,
       coalesce((fact->>'occurred_start')::timestamptz,
                (fact->'_chunk'->>'mentioned_at')::timestamptz) AS at
FROM staged_facts WHERE fact_id = ANY($1)
"""

_IN_FLIGHT = """
SELECT fact_id::text, document_id, chunk_id, embedding, entity_ids::text[] AS entity_ids,
       fact->'causes' AS causes, (fact->'_chunk'->>'index')::int AS idx,
       coalesce((fact->>'occurred_start')::timestamptz,
                (fact->'_chunk'->>'mentioned_at')::timestamptz) AS at
FROM staged_facts s
WHERE bank_id = $1 AND NOT (fact_id = ANY($2)) AND embedding IS NOT NULL
  AND entity_ids IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM operations o WHERE o.operation_id = s.operation_id
                  AND o.status IN ('completed', 'failed', 'cancelled'))
ORDER BY created_at DESC, fact_id
LIMIT $3
"""
# Facts of other documents still in flight (staged, not yet stored) are linked too: without
# them, documents retained together would never link to each other. Bounded per call. Only
# facts of operations still open: an ended one's leftovers (its staging is discarded when it
# ends) must never reach a later run, as a failed run's undecodable fact once did.
IN_FLIGHT_LIMIT = 2000

# Nearest stored facts of every fact of the batch, one query (the HNSW index per fact).
_SEMANTIC = """
SELECT q.fact_id, n.id::text AS id, n.similarity
FROM unnest($2::text[], $3::halfvec[]) AS q(fact_id, embedding)
CROSS JOIN LATERAL (
    SELECT m.id, 1 - (m.embedding <=> q.embedding) AS similarity
    FROM memory_units m
    WHERE m.bank_id = $1 AND m.fact_type <> 'observation'
    ORDER BY m.embedding <=> q.embedding
    LIMIT $4
) n
"""

# Above this many facts in the bank, the semantic query must walk the HNSW index. The planner
# picks an exact scan (every fact of the bank, sorted by distance, per linked fact) whenever
# its statistics make the bank look small, which is exactly what they do during a bulk import
# into a new bank until autovacuum's next ANALYZE: measured in the LoCoMo import (14.8k
# facts), 9.7 s per 1,024-fact call instead of 0.6 s, and PostgreSQL's CPU 45 -> 110 s. Below
# it an exact scan is cheap and, for a small bank in a large database, better than walking a
# shared index past other banks' facts.
HNSW_ABOVE = 1_000
# No sort node allowed, so the only plan left is the HNSW index scan, which comes ordered;
# iterative scanning keeps walking until SEMANTIC_K facts of this bank pass the filter.
_FORCE_HNSW = """
SELECT set_config('enable_sort', 'off', true),
       set_config('hnsw.iterative_scan', 'strict_order', true)
FROM bank_stats WHERE bank_id = $1 AND unit_count > $2
"""

# Stored facts nearest in event time to every fact of the batch, one query: the nearest
# TEMPORAL_K at or before and the nearest TEMPORAL_K after, each a short scan of the facts'
# event-time index (unit_times_event_time, migration 0044) instead of sorting the whole
# ±window.
_TEMPORAL = """
SELECT q.fact_id, n.id::text AS id, n.at
FROM unnest($2::text[], $3::timestamptz[]) AS q(fact_id, at)
CROSS JOIN LATERAL (
    (SELECT t.unit_id AS id, coalesce(t.occurred_start, t.mentioned_at) AS at FROM unit_times t
     WHERE t.bank_id = $1 AND t.fact_type <> 'observation'
       AND coalesce(t.occurred_start, t.mentioned_at) BETWEEN q.at - $4::interval AND q.at
     ORDER BY coalesce(t.occurred_start, t.mentioned_at) DESC, t.unit_id
     LIMIT $5)
    UNION ALL
    (SELECT t.unit_id, coalesce(t.occurred_start, t.mentioned_at) AS at FROM unit_times t
     WHERE t.bank_id = $1 AND t.fact_type <> 'observation'
       AND coalesce(t.occurred_start, t.mentioned_at) > q.at
       AND coalesce(t.occurred_start, t.mentioned_at) <= q.at + $4::interval
     ORDER BY coalesce(t.occurred_start, t.mentioned_at), t.unit_id
     LIMIT $5)
) n
"""

_ENTITY = """
SELECT ue.entity_id::text AS entity_id, ue.unit_id::text AS unit_id, e.mention_count
FROM entities e
CROSS JOIN LATERAL (
    SELECT ue.entity_id, ue.unit_id FROM unit_entities ue
    JOIN memory_units m ON m.id = ue.unit_id
    WHERE ue.entity_id = e.id
    ORDER BY coalesce(m.occurred_start, m.mentioned_at) DESC NULLS LAST, m.id
    LIMIT $2
) ue
WHERE e.id = ANY($1::uuid[])
"""

_SET_LINKS = """
UPDATE staged_facts AS s SET links = v.links::jsonb
FROM unnest($1::uuid[], $2::text[]) AS v(fact_id, links)
WHERE s.fact_id = v.fact_id
"""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def temporal_weight(a: datetime, b: datetime) -> float:
    days = abs((a - b).total_seconds()) / 86400.0
    return math.exp(-days / TEMPORAL_TAU_DAYS)


def entity_weight(mention_count: int) -> float:
    return 1.0 / math.log(math.e + max(mention_count, 0))


def _keep_best(links: list[Link]) -> list[Link]:
    """One link per (target, type), strongest first, bounded."""
    best: dict[tuple[str, str], Link] = {}
    for link in links:
        key = (link.to_unit, link.link_type)
        if key not in best or link.weight > best[key].weight:
            best[key] = link
    ordered = sorted(best.values(), key=lambda x: (-x.weight, x.link_type, x.to_unit))
    return ordered[:MAX_LINKS_PER_FACT]


@dataclass(frozen=True)
class StagedFact:
    """What linking needs of one staged fact."""

    fact_id: str
    chunk_id: str
    index: int | None  # position in its chunk, what `causes` refers to
    at: datetime | None  # event time: occurred, else mentioned
    entity_ids: tuple[str, ...]
    causes: frozenset[int]

    @classmethod
    def of(cls, row: asyncpg.Record) -> StagedFact:
        return cls(
            row["fact_id"],
            row["chunk_id"],
            row["idx"],
            row["at"],
            tuple(row["entity_ids"] or ()),
            frozenset(row["causes"] or ()),
        )


@dataclass(frozen=True)
class LinkInputs:
    """Everything one batch's links are computed from, read before any comparison runs.

    `facts` holds the batch first (rows 0..batch_size-1), then the facts of other batches
    and documents still in flight; `matrix` has their unit embeddings in the same order.
    """

    facts: list[StagedFact]
    batch_size: int
    matrix: NDArray[np.float32]
    stored_semantic: dict[str, list[Link]]
    stored_temporal: dict[str, list[Link]]
    entity_neighbours: dict[str, tuple[int, list[str]]]  # id -> (mentions, recent stored facts)
    options: LinkOptions


async def link_staged(pool: Pool, cpu: Executor, options: LinkOptions) -> int:
    """Link a batch of staged facts; returns how many links were planned."""
    inputs = await read_link_inputs(pool, options)
    if inputs is None:
        return 0
    loop = asyncio.get_running_loop()
    planned = await loop.run_in_executor(cpu, partial(plan_links, inputs))
    # JSON text, not lists: asyncpg would read a list of lists as a 2-D array.
    payloads = [
        json.dumps([{"to": k.to_unit, "type": k.link_type, "weight": k.weight} for k in kept])
        for kept in planned
    ]
    async with pool.acquire() as conn:
        await conn.execute(
            _SET_LINKS, [f.fact_id for f in inputs.facts[: inputs.batch_size]], payloads
        )
    return sum(len(kept) for kept in planned)


async def read_link_inputs(pool: Pool, options: LinkOptions) -> LinkInputs | None:
    async with pool.acquire() as conn:
        rows = [
            r for r in await conn.fetch(_STAGED, options.fact_ids) if r["embedding"] is not None
        ]
        if not rows:
            return None
        in_flight = await conn.fetch(_IN_FLIGHT, options.bank_id, options.fact_ids, IN_FLIGHT_LIMIT)
        ids = [r["fact_id"] for r in rows]
        semantic: dict[str, list[Link]] = {}
        if options.semantic:
            vectors = [r["embedding"] for r in rows]
            async with conn.transaction():
                await conn.execute(_FORCE_HNSW, options.bank_id, HNSW_ABOVE)
                found = await conn.fetch(_SEMANTIC, options.bank_id, ids, vectors, SEMANTIC_K)
            for r in found:
                semantic.setdefault(r["fact_id"], []).append(
                    Link(r["id"], "semantic", float(r["similarity"]))
                )
        temporal: dict[str, list[Link]] = {}
        if options.temporal:
            timed = [r for r in rows if r["at"] is not None]
            temporal = _nearest_in_time(
                timed,
                await conn.fetch(
                    _TEMPORAL,
                    options.bank_id,
                    [r["fact_id"] for r in timed],
                    [r["at"] for r in timed],
                    TEMPORAL_WINDOW,
                    TEMPORAL_K,
                ),
            )
        neighbours = await _entity_neighbours(conn, rows) if options.entity else {}
    peers = rows + list(in_flight)
    matrix = np.vstack([r["embedding"].to_numpy() for r in peers]).astype(np.float32)
    return LinkInputs(
        [StagedFact.of(r) for r in peers],
        len(rows),
        matrix,
        semantic,
        temporal,
        neighbours,
        options,
    )


def _nearest_in_time(
    rows: Sequence[asyncpg.Record], found: Sequence[asyncpg.Record]
) -> dict[str, list[Link]]:
    """The TEMPORAL_K stored facts nearest in time per fact, nearest first."""
    at_of = {r["fact_id"]: r["at"] for r in rows}
    near: dict[str, list[tuple[timedelta, str, datetime]]] = {}
    for r in found:
        gap = abs(r["at"] - at_of[r["fact_id"]])
        near.setdefault(r["fact_id"], []).append((gap, r["id"], r["at"]))
    return {
        fid: [
            Link(uid, "temporal", temporal_weight(at_of[fid], at))
            for _, uid, at in sorted(candidates)[:TEMPORAL_K]
        ]
        for fid, candidates in near.items()
    }


async def _entity_neighbours(
    conn: Connection, rows: list[asyncpg.Record]
) -> dict[str, tuple[int, list[str]]]:
    """entity id -> (mention count, most recent stored facts mentioning it)."""
    ids = sorted({eid for row in rows for eid in (row["entity_ids"] or [])})
    result: dict[str, tuple[int, list[str]]] = {}
    for r in await conn.fetch(_ENTITY, ids, ENTITY_K):
        count, units = result.get(r["entity_id"], (r["mention_count"], []))
        units.append(r["unit_id"])
        result[r["entity_id"]] = (count, units)
    return result


def plan_links(inputs: LinkInputs) -> list[list[Link]]:
    """The kept links of each fact of the batch, in batch order (CPU work, no I/O)."""
    options = inputs.options
    n = inputs.batch_size
    facts = inputs.facts
    semantic = _semantic_peers(inputs) if options.semantic else None
    temporal = _temporal_peers(inputs) if options.temporal else None
    by_entity: dict[str, list[int]] = {}
    by_chunk: dict[str, list[int]] = {}
    for j, fact in enumerate(facts):
        for eid in dict.fromkeys(fact.entity_ids):
            by_entity.setdefault(eid, []).append(j)
        by_chunk.setdefault(fact.chunk_id, []).append(j)
    planned: list[list[Link]] = []
    for i in range(n):
        fact = facts[i]
        links: list[Link] = []
        if semantic is not None:
            stored = inputs.stored_semantic.get(fact.fact_id, [])
            links += _merge(stored, semantic[i], fact, SEMANTIC_K, SEMANTIC_MIN)
        if temporal is not None and fact.at is not None:
            stored = inputs.stored_temporal.get(fact.fact_id, [])
            links += _merge(stored, temporal[i], fact, TEMPORAL_K)
        if options.entity:
            links += _entity_links(i, facts, by_entity, inputs.entity_neighbours)
        if options.causal and fact.causes:
            links += [
                Link(facts[j].fact_id, "causal", 1.0)
                for j in by_chunk[fact.chunk_id]
                if j != i and facts[j].index in fact.causes
            ]
        planned.append(_keep_best([x for x in links if x.to_unit != fact.fact_id]))
    return planned


def _merge(
    stored: list[Link], peers: list[Link], fact: StagedFact, k: int, floor: float = 0.0
) -> list[Link]:
    """Stored and in-flight candidates of one type: the strongest k at or above the floor
    (the sort is stable, so stored facts win ties)."""
    found = [x for x in stored + peers if x.to_unit != fact.fact_id and x.weight >= floor]
    found.sort(key=lambda x: -x.weight)
    return found[:k]


def _semantic_peers(inputs: LinkInputs) -> list[list[Link]]:
    """Per fact of the batch, its SEMANTIC_K + 1 most similar peers (itself among them)."""
    n = inputs.batch_size
    facts = inputs.facts
    similarities = inputs.matrix[:n] @ inputs.matrix.T  # n x peers, unit vectors: cosine
    take = min(SEMANTIC_K + 1, similarities.shape[1])
    if take < similarities.shape[1]:
        top = np.argpartition(-similarities, take - 1, axis=1)[:, :take]
    else:
        top = np.broadcast_to(np.arange(similarities.shape[1]), (n, take))
    result: list[list[Link]] = []
    for i in range(n):
        row = similarities[i]
        order = top[i][np.argsort(-row[top[i]])]
        result.append([Link(facts[j].fact_id, "semantic", float(row[j])) for j in order])
    return result


def _temporal_peers(inputs: LinkInputs) -> list[list[Link]]:
    """Per fact of the batch, its TEMPORAL_K nearest peers in time within the window (ties in
    peer order); facts without a time get none."""
    n = inputs.batch_size
    facts = inputs.facts
    known = np.array([f.at is not None for f in facts], dtype=bool)
    times = np.array(
        [(f.at - _EPOCH) // _MICROSECOND if f.at is not None else 0 for f in facts],
        dtype=np.int64,
    )
    gaps = np.abs(times[None, :] - times[:n, None])  # microseconds, exact
    near = known[None, :] & known[:n, None] & (gaps <= TEMPORAL_WINDOW // _MICROSECOND)
    near[np.arange(n), np.arange(n)] = False
    ranked = np.where(near, gaps, np.iinfo(np.int64).max)
    order = np.argsort(ranked, axis=1, kind="stable")[:, :TEMPORAL_K]
    result: list[list[Link]] = []
    for i in range(n):
        at = facts[i].at
        links: list[Link] = []
        result.append(links)
        if at is None:
            continue
        for j in order[i]:
            other = facts[j].at
            if near[i, j] and other is not None:
                links.append(Link(facts[j].fact_id, "temporal", temporal_weight(at, other)))
    return result


def _entity_links(
    i: int,
    facts: list[StagedFact],
    by_entity: dict[str, list[int]],
    neighbours: dict[str, tuple[int, list[str]]],
) -> list[Link]:
    links: list[Link] = []
    for eid in facts[i].entity_ids:
        count, units = neighbours.get(eid, (0, []))
        members = by_entity[eid]  # every peer mentioning it, fact i among them
        peer_ids = [facts[j].fact_id for j in members[: ENTITY_K + 1] if j != i][:ENTITY_K]
        # Mentions: stored ones, the other peers' (len(members) - 1) and this fact's own.
        weight = entity_weight(count + len(members))
        links += [Link(unit, "entity", weight) for unit in units[:ENTITY_K]]
        links += [Link(pid, "entity", weight) for pid in peer_ids]
    return links
