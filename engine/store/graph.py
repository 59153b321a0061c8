"""Graphs for looking at a bank: entities joined by the facts they share, and memories joined
by their stored links. Read-only; the console draws them."""

from __future__ import annotations

from dataclasses import dataclass

from engine.db import Connection
from engine.store.memories import Memory, MemoryFilter, list_memories


@dataclass(frozen=True)
class EntityNode:
    id: str
    canonical_name: str
    kind: str
    mention_count: int


@dataclass(frozen=True)
class CoOccurrence:
    source: str
    target: str
    count: int


@dataclass(frozen=True)
class EntityGraph:
    nodes: list[EntityNode]
    edges: list[CoOccurrence]
    total_entities: int
    total_edges: int


@dataclass(frozen=True)
class MemoryEdge:
    source: str
    target: str
    link_type: str
    weight: float


@dataclass(frozen=True)
class MemoryGraph:
    nodes: list[Memory]
    edges: list[MemoryEdge]
    total_units: int


# Pairs are counted from unit_entities joined to itself on the fact: each fact naming k
# entities adds k(k-1)/2 pairs, and extraction names few per fact, so this stays a small
# multiple of the bank's fact count. The entity ids come from the bank's own entities so the
# unit_entities_entity index serves the join.
_PAIRS_SQL = """
WITH bank_entities AS (SELECT id FROM entities WHERE bank_id = $1),
pairs AS (
    SELECT a.entity_id AS source, b.entity_id AS target, count(*) AS n
    FROM unit_entities a
    JOIN unit_entities b ON b.unit_id = a.unit_id AND b.entity_id > a.entity_id
    WHERE a.entity_id IN (SELECT id FROM bank_entities)
    GROUP BY a.entity_id, b.entity_id
    HAVING count(*) >= $2
)
SELECT source::text AS source, target::text AS target, n::int AS count,
       count(*) OVER ()::int AS total
FROM pairs ORDER BY n DESC, source, target LIMIT $3
"""

# The endpoints of the returned edges, plus the most-mentioned entities up to `limit`, so a
# bank whose entities rarely share a fact still shows its main entities.
_NODES_SQL = """
SELECT id::text AS id, canonical_name, kind, mention_count FROM entities
WHERE bank_id = $1 AND (id = ANY($2::uuid[]) OR id IN (
    SELECT id FROM entities WHERE bank_id = $1
    ORDER BY mention_count DESC, canonical_name, id LIMIT $3))
ORDER BY mention_count DESC, canonical_name, id
"""


async def entity_graph(conn: Connection, bank_id: str, limit: int, min_count: int) -> EntityGraph:
    """The `limit` strongest co-occurrence edges (facts naming both entities, at least
    `min_count`) and the entities they join."""
    rows = await conn.fetch(_PAIRS_SQL, bank_id, min_count, limit)
    edges = [CoOccurrence(r["source"], r["target"], r["count"]) for r in rows]
    endpoints = sorted({e.source for e in edges} | {e.target for e in edges})
    node_rows = await conn.fetch(_NODES_SQL, bank_id, endpoints, limit)
    total = await conn.fetchval("SELECT count(*) FROM entities WHERE bank_id = $1", bank_id)
    return EntityGraph(
        nodes=[EntityNode(**dict(r)) for r in node_rows],
        edges=edges,
        total_entities=int(total),
        total_edges=int(rows[0]["total"]) if rows else 0,
    )


_LINKS_SQL = """
SELECT from_unit::text AS source, to_unit::text AS target, link_type, weight
FROM memory_links
WHERE bank_id = $1 AND from_unit = ANY($2::uuid[]) AND to_unit = ANY($2::uuid[])
ORDER BY weight DESC, from_unit, to_unit, link_type
"""


async def memory_graph(
    conn: Connection, bank_id: str, where: MemoryFilter, limit: int
) -> MemoryGraph:
    """The newest `limit` memories matching `where`, and the stored links among them."""
    memories, total = await list_memories(conn, bank_id, where, limit, 0)
    rows = await conn.fetch(_LINKS_SQL, bank_id, [m.id for m in memories])
    return MemoryGraph(
        nodes=memories,
        edges=[MemoryEdge(**dict(r)) for r in rows],
        total_units=total,
    )
