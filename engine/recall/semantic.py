"""Semantic arm: nearest facts by cosine over the HNSW index, filters inside the scan.

`hnsw.iterative_scan = relaxed_order` (pgvector >= 0.8) keeps scanning the graph until
enough rows pass the bank/type/tag filters, instead of returning the ef_search nearest of
all banks and filtering afterwards (which starves a small bank in a big table). Relaxed order
may return rows slightly out of order, so the materialised hits are sorted again.
`hnsw.ef_search` follows the request budget. Both are SET LOCAL, hence the transaction.
"""

from __future__ import annotations

import time

from pgvector import Vector

from engine.db import Connection
from engine.recall.filters import ACTIVE, filter_args, filter_sql, visible_states
from engine.recall.types import ArmHit, ArmResult, FloatVector, RecallRequest
from engine.store.memories import TagsMatch

SCAN_SETTINGS = (
    "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true),"
    " set_config('hnsw.ef_search', $1::text, true)"
)


def semantic_sql(tags_match: TagsMatch, states: tuple[str, ...] = ACTIVE) -> str:
    return f"""
WITH hits AS MATERIALIZED (
    SELECT m.id, m.embedding <=> $4 AS distance
    FROM memory_units m
    WHERE {filter_sql("m", tags_match, states)}
    ORDER BY m.embedding <=> $4
    LIMIT $5
)
SELECT id::text AS id, 1 - distance AS similarity FROM hits
WHERE 1 - distance >= $6
ORDER BY distance, id
"""


async def semantic_arm(
    conn: Connection,
    request: RecallRequest,
    vector: FloatVector,
    *,
    limit: int,
    ef_search: int,
    floor: float,
) -> ArmResult:
    started = time.perf_counter()
    async with conn.transaction():
        await conn.execute(SCAN_SETTINGS, str(max(ef_search, limit)))
        rows = await conn.fetch(
            semantic_sql(request.tags_match, visible_states(request)),
            *filter_args(request),
            Vector(vector),
            limit,
            floor,
        )
    hits = [ArmHit(r["id"], float(r["similarity"])) for r in rows]
    return ArmResult("semantic", hits, (time.perf_counter() - started) * 1000)
