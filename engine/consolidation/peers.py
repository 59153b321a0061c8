"""Consolidation's peers: older consolidated facts of a fact's scope that no observation uses
yet, sharing an entity with it, nearest first (engine/consolidation/candidates.py reads the
backlog and the related observations)."""

from __future__ import annotations

from pgvector import Vector

from engine.consolidation.candidates import (
    IN_SCOPE,
    Neighbour,
    PendingFact,
    by_key,
    nearest_scan,
    neighbour,
)
from engine.db import Connection
from engine.store.backlog import consolidated

# Archived memories take no part (docs/lifecycle.md): an archived fact is no evidence for a
# new observation, and an archived observation is not grown again. A superseded fact still is:
# "lived in Oslo, then moved to Bergen" is the belief its successor refines.
# Older facts of the scope that no observation uses yet, sharing an entity with the fact.
# A fact with entities reads the facts that share one through unit_entities' (entity, unit)
# index and measures only those: the whole bank was measured before, so each fact cost more
# than the last (3,200 facts: 40 ms; issue 17's 100k-fact journal: consolidation at 18
# facts/s). The lateral subquery (`by_key`) reads each by primary key: with a
# join the planner scanned the scope's index for the whole bank, misled by the tags
# estimate. A fact without entities meets the facts without entities, from the scope scan.
_PEER_COLUMNS = """m.id::text AS id, m.text, 1 - (m.embedding <=> $3) AS similarity,
       NULL::jsonb AS claim, coalesce(m.occurred_start, m.mentioned_at, m.created_at) AS event_at,
       m.created_at, m.embedding"""
_PEER_FILTER = f"""m.bank_id = $1 AND m.fact_type <> 'observation' AND {IN_SCOPE}
  AND m.state IN ('active', 'superseded') AND {consolidated("m")} AND m.id <> $4::uuid
  AND NOT EXISTS (SELECT 1 FROM observation_evidence e WHERE e.fact_id = m.id)
  AND 1 - (m.embedding <=> $3) >= $6"""
_PEERS_BY_ENTITY = f"""
WITH sharing AS MATERIALIZED (
    SELECT DISTINCT ue.unit_id FROM unit_entities ue
    WHERE ue.entity_id = ANY($5::uuid[])
      AND NOT EXISTS (SELECT 1 FROM observation_evidence e WHERE e.fact_id = ue.unit_id)
)
SELECT {_PEER_COLUMNS}, m.embedding <=> $3 AS distance FROM sharing s
CROSS JOIN LATERAL ({by_key("s.unit_id")}) m
WHERE {_PEER_FILTER}
ORDER BY distance, id
LIMIT $7
"""
# A fact naming popular entities (more mentions in all than PEER_SCAN_MENTIONS) reads its
# peers among the bank's PEER_NEAREST nearest facts instead (HNSW; only the bank and type
# inside the scan, so it stops after about PEER_NEAREST tuples), then keeps the unused ones
# sharing an entity: the cost no longer grows with how popular its entities
# are (the skewed journal of bench/entity_skew.py: a few people are named in thousands of
# facts, and the entity path read all of them for each such fact, so consolidation slowed as
# more of them were consolidated). What it can miss are peers farther than the PEER_NEAREST
# nearest facts of the bank; a supporting fact (>= JOIN_SIMILARITY) or a contradicting one
# (claims matched, ~0.6) is among the nearest in practice (docs/benchmarks.md, "Entity
# resolution and consolidation on a skewed journal").
# 200 until the HNSW scan was a third of PostgreSQL's consolidation time at 100,000 facts; 100
# reads ~35% fewer buffers in that statement, and the 10,000-fact journal's 1,096 observations
# came out identical row by row (docs/benchmarks.md, "Fewer round trips and a narrower peer
# scan"). It must stay above PEER_FACTS + prefetch.py's MARGIN, which the scan needs anyway.
PEER_SCAN_MENTIONS = 400
PEER_NEAREST = 100
# Everything the peer filter and the answer need is read in the scan, so nothing joins back
# to memory_units: with sorting off, the planner answered such a join with a second HNSW scan
# carrying every filter (2,000+ tuples, 70 ms instead of ~5).
_PEERS_NEAREST = f"""
WITH near AS MATERIALIZED (
    SELECT m.id, m.text, m.tags, m.state, m.created_at, m.embedding,
           coalesce(m.occurred_start, m.mentioned_at, m.created_at) AS event_at,
           m.embedding <=> $3 AS distance
    FROM memory_units m
    WHERE m.bank_id = $1 AND m.fact_type <> 'observation'
    ORDER BY m.embedding <=> $3
    LIMIT $8
)
SELECT m.id::text AS id, m.text, 1 - m.distance AS similarity, NULL::jsonb AS claim,
       m.event_at, m.created_at, m.embedding, m.distance
FROM near m
WHERE {IN_SCOPE} AND m.state IN ('active', 'superseded') AND {consolidated("m")}
  AND m.id <> $4::uuid AND 1 - m.distance >= $6
  AND NOT EXISTS (SELECT 1 FROM observation_evidence e WHERE e.fact_id = m.id)
  -- by the candidate's key: as a semi-join the planner read every mention of the
  -- fact's entities for each candidate (a popular person's thousands of facts:
  -- 790 ms a batch at 10,000 facts, 392,000 rows read)
  AND array(SELECT ue.entity_id FROM unit_entities ue WHERE ue.unit_id = m.id)
      && $5::uuid[]
ORDER BY m.distance, m.id
LIMIT $7
"""
_PEERS_WITHOUT_ENTITIES = f"""
SELECT {_PEER_COLUMNS}
FROM memory_units m
WHERE {_PEER_FILTER}
  AND cardinality($5::uuid[]) = 0
  AND NOT EXISTS (SELECT 1 FROM unit_entities ue WHERE ue.unit_id = m.id)
ORDER BY m.embedding <=> $3, m.id
LIMIT $7
"""


async def peer_facts(
    conn: Connection,
    bank_id: str,
    fact: PendingFact,
    *,
    floor: float,
    limit: int,
    scan_mentions: int = PEER_SCAN_MENTIONS,
) -> list[Neighbour]:
    """Consolidated facts of the scope that no observation uses, sharing an entity with the
    fact, nearest first; their claims are parsed. Run inside a transaction."""
    args = (bank_id, fact.scope, Vector(fact.embedding), fact.id, fact.entity_ids, floor, limit)
    if not fact.entity_ids:
        rows = await conn.fetch(_PEERS_WITHOUT_ENTITIES, *args)
    elif fact.mentions <= scan_mentions:
        rows = await conn.fetch(_PEERS_BY_ENTITY, *args)
    else:
        nearest = max(PEER_NEAREST, limit)
        async with nearest_scan(conn, nearest):
            rows = await conn.fetch(_PEERS_NEAREST, *args, nearest)
    return [neighbour(r, parse=True) for r in rows]
