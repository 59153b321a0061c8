"""Step 5: link each staged fact to related facts (semantic, temporal, entity, causal).

Links go to facts already stored in the bank and to staged facts of the same document (they
are stored in the same transaction). Fan-out is bounded per fact and per type.

Weights, all in (0, 1]:
- semantic: the cosine similarity, kept when >= SEMANTIC_MIN (nearest SEMANTIC_K).
- temporal: exp(-|dt| / TEMPORAL_TAU) over event time (occurred, else mentioned), for facts
  within TEMPORAL_WINDOW (nearest TEMPORAL_K).
- entity: 1 / ln(e + n) for an entity mentioned by n facts, so rare entities link strongly and
  a name on every fact (the user) barely at all; the most recent ENTITY_K facts per entity.
- causal: 1.0, from the extractor's relations inside one chunk.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import datetime, timedelta

import asyncpg
import numpy as np

from engine.db import Connection
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

# Nearest stored facts and nearest-in-time stored facts for a whole batch, one query each
# (a query per fact made linking the slowest step of bulk imports).
_SEMANTIC = """
SELECT s.fact_id::text AS fact_id, n.id::text AS id, n.similarity
FROM staged_facts s
CROSS JOIN LATERAL (
    SELECT m.id, 1 - (m.embedding <=> s.embedding) AS similarity FROM memory_units m
    WHERE m.bank_id = $1 AND m.fact_type <> 'observation'
    ORDER BY m.embedding <=> s.embedding
    LIMIT $3
) n
WHERE s.fact_id = ANY($2) AND s.embedding IS NOT NULL
"""

_TEMPORAL = """
WITH s AS (
    SELECT fact_id, coalesce((fact->>'occurred_start')::timestamptz,
                             (fact->'_chunk'->>'mentioned_at')::timestamptz) AS at
    FROM staged_facts WHERE fact_id = ANY($2)
)
SELECT s.fact_id::text AS fact_id, n.id::text AS id, n.at
FROM s
CROSS JOIN LATERAL (
    SELECT m.id, coalesce(m.occurred_start, m.mentioned_at) AS at FROM memory_units m
    WHERE m.bank_id = $1 AND m.fact_type <> 'observation'
      AND coalesce(m.occurred_start, m.mentioned_at)
          BETWEEN s.at - $3::interval AND s.at + $3::interval
    ORDER BY abs(extract(epoch FROM coalesce(m.occurred_start, m.mentioned_at) - s.at))
    LIMIT $4
) n
WHERE s.at IS NOT NULL
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


_IN_FLIGHT = """
SELECT fact_id::text, document_id, chunk_id, embedding, entity_ids::text[] AS entity_ids,
       fact->'causes' AS causes, (fact->'_chunk'->>'index')::int AS idx,
       coalesce((fact->>'occurred_start')::timestamptz,
                (fact->'_chunk'->>'mentioned_at')::timestamptz) AS at
FROM staged_facts
WHERE bank_id = $1 AND NOT (fact_id = ANY($2)) AND embedding IS NOT NULL
  AND entity_ids IS NOT NULL
ORDER BY created_at DESC
LIMIT $3
"""
# Facts of other documents still in flight (staged, not yet stored) are linked too: without
# them, documents retained together would never link to each other. Bounded per call.
IN_FLIGHT_LIMIT = 2000


@dataclass(frozen=True)
class _Peers:
    """Staged facts a batch may link to without a database round trip: same-document
    siblings and other documents in flight."""

    rows: list[asyncpg.Record]
    matrix: np.ndarray  # unit embeddings, one row per peer
    times: np.ndarray  # event time in epoch seconds, +inf when unknown
    by_entity: dict[str, list[str]]  # entity id -> peer fact ids

    @classmethod
    def of(cls, rows: list[asyncpg.Record]) -> _Peers:
        vectors = [r["embedding"].to_numpy() for r in rows]
        matrix = np.vstack(vectors) if vectors else np.zeros((0, 1), dtype=np.float32)
        times = np.array(
            [r["at"].timestamp() if r["at"] is not None else np.inf for r in rows], dtype=float
        )
        by_entity: dict[str, list[str]] = {}
        for r in rows:
            for eid in r["entity_ids"] or []:
                by_entity.setdefault(eid, []).append(r["fact_id"])
        return cls(rows, matrix, times, by_entity)


async def link_staged(conn: Connection, options: LinkOptions) -> int:
    rows = [r for r in await conn.fetch(_STAGED, options.fact_ids) if r["embedding"] is not None]
    in_flight = await conn.fetch(_IN_FLIGHT, options.bank_id, options.fact_ids, IN_FLIGHT_LIMIT)
    peers = _Peers.of(rows + list(in_flight))
    stored: dict[str, list[Link]] = {}
    if options.semantic:
        async with conn.transaction():
            await conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
            for r in await conn.fetch(_SEMANTIC, options.bank_id, options.fact_ids, SEMANTIC_K):
                stored.setdefault(r["fact_id"], []).append(
                    Link(r["id"], "semantic", float(r["similarity"]))
                )
    if options.temporal:
        at_of = {r["fact_id"]: r["at"] for r in rows}
        for r in await conn.fetch(
            _TEMPORAL, options.bank_id, options.fact_ids, TEMPORAL_WINDOW, TEMPORAL_K
        ):
            if r["fact_id"] in at_of:
                weight = temporal_weight(at_of[r["fact_id"]], r["at"])
                stored.setdefault(r["fact_id"], []).append(Link(r["id"], "temporal", weight))
    entity_facts = await _entity_neighbours(conn, rows) if options.entity else {}
    fact_ids: list[str] = []
    payloads: list[str] = []
    total = 0
    for index, row in enumerate(rows):
        links = list(stored.get(row["fact_id"], []))
        if options.semantic:
            links += _semantic_peers(index, peers)
        if options.temporal and row["at"] is not None:
            links += _temporal_peers(row, index, peers)
        if options.entity:
            links += _entity_links(row, peers, entity_facts)
        if options.causal:
            links += _causal(row, peers)
        kept = _keep_best(_bounded([x for x in links if x.to_unit != row["fact_id"]]))
        total += len(kept)
        fact_ids.append(row["fact_id"])
        # JSON text, not lists: asyncpg would read a list of lists as a 2-D array.
        payloads.append(
            json.dumps([{"to": k.to_unit, "type": k.link_type, "weight": k.weight} for k in kept])
        )
    if fact_ids:
        await conn.execute(_SET_LINKS, fact_ids, payloads)
    return total


def _bounded(links: list[Link]) -> list[Link]:
    """Per type: semantic above the floor, top SEMANTIC_K; temporal top TEMPORAL_K."""
    semantic = sorted(
        (x for x in links if x.link_type == "semantic" and x.weight >= SEMANTIC_MIN),
        key=lambda x: -x.weight,
    )[:SEMANTIC_K]
    temporal = sorted((x for x in links if x.link_type == "temporal"), key=lambda x: -x.weight)
    others = [x for x in links if x.link_type not in ("semantic", "temporal")]
    return semantic + temporal[:TEMPORAL_K] + others


def _semantic_peers(index: int, peers: _Peers) -> list[Link]:
    """Rows of a batch come first among the peers, so `index` is this fact's own row."""
    similarities = peers.matrix @ peers.matrix[index]
    best = np.argsort(-similarities)[: SEMANTIC_K + 1]
    return [
        Link(peers.rows[i]["fact_id"], "semantic", float(similarities[i]))
        for i in best
        if i != index and similarities[i] >= SEMANTIC_MIN
    ]


def _temporal_peers(row: asyncpg.Record, index: int, peers: _Peers) -> list[Link]:
    at: datetime = row["at"]
    gaps = np.abs(peers.times - at.timestamp())
    window = TEMPORAL_WINDOW.total_seconds()
    near = [i for i in np.argsort(gaps)[: TEMPORAL_K + 1] if i != index and gaps[i] <= window]
    return [
        Link(peers.rows[i]["fact_id"], "temporal", temporal_weight(at, peers.rows[i]["at"]))
        for i in near
    ]


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


def _entity_links(
    row: asyncpg.Record,
    peers: _Peers,
    neighbours: dict[str, tuple[int, list[str]]],
) -> list[Link]:
    links: list[Link] = []
    for eid in row["entity_ids"] or []:
        count, units = neighbours.get(eid, (0, []))
        peer_ids = [f for f in peers.by_entity.get(eid, []) if f != row["fact_id"]]
        weight = entity_weight(count + len(peer_ids) + 1)
        links += [Link(unit, "entity", weight) for unit in units[:ENTITY_K]]
        links += [Link(pid, "entity", weight) for pid in peer_ids[:ENTITY_K]]
    return links


def _causal(row: asyncpg.Record, peers: _Peers) -> list[Link]:
    causes = set(row["causes"] or [])
    return [
        Link(p["fact_id"], "causal", 1.0)
        for p in peers.rows
        if p["chunk_id"] == row["chunk_id"]
        and p["idx"] in causes
        and p["fact_id"] != row["fact_id"]
    ]
