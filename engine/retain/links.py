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

_SEMANTIC = """
SELECT id::text, 1 - (embedding <=> $2) AS similarity
FROM memory_units
WHERE bank_id = $1 AND fact_type <> 'observation'
ORDER BY embedding <=> $2
LIMIT $3
"""

_TEMPORAL = """
SELECT id::text, coalesce(occurred_start, mentioned_at) AS at
FROM memory_units
WHERE bank_id = $1 AND fact_type <> 'observation'
  AND coalesce(occurred_start, mentioned_at) BETWEEN $2 AND $3
ORDER BY abs(extract(epoch FROM coalesce(occurred_start, mentioned_at) - $4))
LIMIT $5
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

    @classmethod
    def of(cls, rows: list[asyncpg.Record]) -> _Peers:
        vectors = [r["embedding"].to_numpy() for r in rows]
        dim = len(vectors[0]) if vectors else 0
        matrix = np.vstack(vectors) if vectors else np.zeros((0, dim), dtype=np.float32)
        return cls(rows, matrix)


async def link_staged(conn: Connection, options: LinkOptions) -> int:
    rows = [r for r in await conn.fetch(_STAGED, options.fact_ids) if r["embedding"] is not None]
    in_flight = await conn.fetch(_IN_FLIGHT, options.bank_id, options.fact_ids, IN_FLIGHT_LIMIT)
    peers = _Peers.of(rows + list(in_flight))
    entity_facts = await _entity_neighbours(conn, rows) if options.entity else {}
    fact_ids: list[str] = []
    payloads: list[str] = []
    total = 0
    for row in rows:
        links: list[Link] = []
        if options.semantic:
            links += await _semantic(conn, options.bank_id, row, peers)
        if options.temporal and row["at"] is not None:
            links += await _temporal(conn, options.bank_id, row, peers)
        if options.entity:
            links += _entity_links(row, peers, entity_facts)
        if options.causal:
            links += _causal(row, peers)
        kept = _keep_best([link for link in links if link.to_unit != row["fact_id"]])
        total += len(kept)
        fact_ids.append(row["fact_id"])
        # JSON text, not lists: asyncpg would read a list of lists as a 2-D array.
        payloads.append(
            json.dumps([{"to": k.to_unit, "type": k.link_type, "weight": k.weight} for k in kept])
        )
    if fact_ids:
        await conn.execute(_SET_LINKS, fact_ids, payloads)
    return total


async def _semantic(
    conn: Connection, bank_id: str, row: asyncpg.Record, peers: _Peers
) -> list[Link]:
    vector = row["embedding"]
    found = [
        Link(r["id"], "semantic", float(r["similarity"]))
        for r in await conn.fetch(_SEMANTIC, bank_id, vector, SEMANTIC_K)
    ]
    if len(peers.rows):
        similarities = peers.matrix @ vector.to_numpy()
        for index in np.argsort(-similarities)[: SEMANTIC_K + 1]:
            found.append(Link(peers.rows[index]["fact_id"], "semantic", float(similarities[index])))
    found = [
        link for link in found if link.weight >= SEMANTIC_MIN and link.to_unit != row["fact_id"]
    ]
    found.sort(key=lambda x: -x.weight)
    return found[:SEMANTIC_K]


async def _temporal(
    conn: Connection, bank_id: str, row: asyncpg.Record, peers: _Peers
) -> list[Link]:
    at: datetime = row["at"]
    found = [
        Link(r["id"], "temporal", temporal_weight(at, r["at"]))
        for r in await conn.fetch(
            _TEMPORAL, bank_id, at - TEMPORAL_WINDOW, at + TEMPORAL_WINDOW, at, TEMPORAL_K
        )
    ]
    found += [
        Link(p["fact_id"], "temporal", temporal_weight(at, p["at"]))
        for p in peers.rows
        if p["at"] is not None
        and abs(p["at"] - at) <= TEMPORAL_WINDOW
        and p["fact_id"] != row["fact_id"]
    ]
    found.sort(key=lambda x: -x.weight)
    return found[:TEMPORAL_K]


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
        peer_ids = [
            p["fact_id"]
            for p in peers.rows
            if p["fact_id"] != row["fact_id"] and eid in (p["entity_ids"] or [])
        ]
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
