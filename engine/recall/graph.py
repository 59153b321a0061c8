"""Graph arm: expand from the other arms' best candidates through stored links and entities.

Seeds are the top few hits of the semantic, keyword and temporal arms, each weighted
1 / (1 + rank) by its best rank. A neighbour n of seed s scores
    w_s · link_weight · type_weight[link_type]                     (memory_links, both ways)
    w_s · specificity(e) for each entity e that s and n mention     (unit_entities)
summed over seeds, then scaled by (1 − β + β·max(0, cos(n, query))): a linked on-topic fact
beats an equally linked off-topic one, but a second hop, which by nature says something
the query does not, is not scored out of existence (β = 0.5).
Facts the other arms already found are left out: the graph's job is to reach what they
missed, and its best new finds are guaranteed a place in the rerank (config `reserve`).
specificity(e) = ln((N + 1) / (n_e + 0.5)) / ln(N + 1) for an entity mentioned by n_e of the
bank's N facts: 1 for a name on one fact, near 0 for the user's own name.

Work is bounded: at most `fanout` links per seed (strongest first), entities mentioned by more
than `max_entity_mentions` facts are not expanded, at most `max_entities` shared entities are
expanded (the largest seed weight × specificity first), and each contributes at most
`fanout` facts: the most similar to the query among up to `entity_scan` of its mentions
(all of them for an entity in fewer facts; otherwise a fixed pseudo-random sample, the
first by id, whose ids are uuid5 hashes). Measured at 14.5k synthetic facts
(bench/recall_latency.py): unbounded, 16 entities × ~530 mentions meant 8,454 memory_units
reads and 110-160 ms per query; bounded (8 × 96) the arm reads at most 768.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence, Set

import asyncpg
from pgvector import Vector

from engine.db import Pool
from engine.recall.filters import ACTIVE, filter_args, filter_sql, visible_states
from engine.recall.types import ArmHit, ArmResult, FloatVector, RecallRequest
from engine.store.memories import TagsMatch


def links_sql(tags_match: TagsMatch, states: tuple[str, ...] = ACTIVE) -> str:
    """Neighbours along memory_links ($4 seeds, $5 seed weights, $6 fan-out, $7 query)."""
    return f"""
WITH seeds AS (SELECT * FROM unnest($4::uuid[], $5::float8[]) AS s(id, w))
SELECT m.id::text AS id, l.link_type, s.w * l.weight AS strength,
       1 - (m.embedding <=> $7) AS similarity
FROM seeds s
CROSS JOIN LATERAL (
    SELECT other, link_type, weight FROM (
        SELECT to_unit AS other, link_type, weight FROM memory_links WHERE from_unit = s.id
        UNION ALL
        SELECT from_unit, link_type, weight FROM memory_links WHERE to_unit = s.id
    ) x ORDER BY weight DESC, other LIMIT $6
) l
JOIN memory_units m ON m.id = l.other
WHERE {filter_sql("m", tags_match, states)} AND m.id <> ALL($4::uuid[])
"""


def entities_sql(tags_match: TagsMatch, states: tuple[str, ...] = ACTIVE) -> str:
    """Facts sharing the seeds' entities ($4 seeds, $5 weights, $6 fan-out, $7 query,
    $8 mention cap, $9 entities expanded, $10 mentions read per entity)."""
    return f"""
WITH seeds AS (SELECT * FROM unnest($4::uuid[], $5::float8[]) AS s(id, w)),
bank AS (
    SELECT coalesce((SELECT unit_count FROM bank_stats WHERE bank_id = $1), 0)::float8 AS n
),
shared AS (
    SELECT ue.entity_id, sum(s.w) AS w,
           ln((bank.n + 1) / (e.mention_count + 0.5)) / ln(bank.n + 2) AS specificity
    FROM bank, seeds s
    JOIN unit_entities ue ON ue.unit_id = s.id
    JOIN entities e ON e.id = ue.entity_id
    WHERE e.mention_count <= $8
    GROUP BY ue.entity_id, e.mention_count, bank.n
    ORDER BY sum(s.w) * ln((bank.n + 1) / (e.mention_count + 0.5)) DESC, ue.entity_id
    LIMIT $9
)
SELECT x.id::text AS id, 'entity_shared' AS link_type, sh.w * sh.specificity AS strength,
       x.similarity
FROM shared sh
CROSS JOIN LATERAL (
    SELECT m.id, 1 - (m.embedding <=> $7) AS similarity
    FROM (SELECT ue.unit_id FROM unit_entities ue
          WHERE ue.entity_id = sh.entity_id AND ue.unit_id <> ALL($4::uuid[])
          ORDER BY ue.unit_id LIMIT $10) ue
    JOIN memory_units m ON m.id = ue.unit_id
    WHERE {filter_sql("m", tags_match, states)}
    ORDER BY m.embedding <=> $7
    LIMIT $6
) x
"""


def graph_scores(
    rows: Sequence[tuple[str, str, float, float]],
    type_weights: Mapping[str, float],
    *,
    similarity_weight: float,
    exclude: Set[str] = frozenset(),
) -> list[ArmHit]:
    """Sum each neighbour's weighted link strengths, scaled by its query similarity; best
    first, ties by id; neighbours in `exclude` are dropped."""
    strength: dict[str, float] = {}
    similarity: dict[str, float] = {}
    for unit_id, link_type, value, sim in rows:
        if unit_id in exclude:
            continue
        factor = type_weights.get(link_type, 1.0)
        strength[unit_id] = strength.get(unit_id, 0.0) + value * factor
        similarity[unit_id] = sim
    beta = similarity_weight
    scored = [
        ArmHit(unit_id, total * (1 - beta + beta * max(similarity[unit_id], 0.0)))
        for unit_id, total in strength.items()
    ]
    scored = [hit for hit in scored if hit.score > 0]
    scored.sort(key=lambda h: (-h.score, h.unit_id))
    return scored


async def _fetch(pool: Pool, sql: str, *args: object) -> list[asyncpg.Record]:
    async with pool.acquire() as conn:
        return await conn.fetch(sql, *args)


async def graph_arm(
    pool: Pool,
    request: RecallRequest,
    vector: FloatVector,
    seeds: Sequence[tuple[str, float]],
    *,
    limit: int,
    fanout: int,
    type_weights: Mapping[str, float],
    max_entity_mentions: int,
    similarity_weight: float,
    max_entities: int,
    entity_scan: int,
    exclude: Set[str] = frozenset(),
) -> ArmResult:
    """Both expansions run at once, each on its own pooled connection."""
    started = time.perf_counter()
    if not seeds:
        return ArmResult("graph", [], 0.0, "no seeds")
    ids = [s[0] for s in seeds]
    weights = [s[1] for s in seeds]
    query = Vector(vector)
    args = (*filter_args(request), ids, weights, fanout, query)
    reads = [_fetch(pool, links_sql(request.tags_match, visible_states(request)), *args)]
    if type_weights.get("entity_shared", 1.0) > 0:
        reads.append(
            _fetch(
                pool,
                entities_sql(request.tags_match, visible_states(request)),
                *args,
                max_entity_mentions,
                max_entities,
                entity_scan,
            )
        )
    rows = [
        (r["id"], r["link_type"], r["strength"], r["similarity"])
        for found in await asyncio.gather(*reads)
        for r in found
    ]
    hits = graph_scores(rows, type_weights, similarity_weight=similarity_weight, exclude=exclude)
    note = f"{len(seeds)} seeds"
    return ArmResult("graph", hits[:limit], (time.perf_counter() - started) * 1000, note)
