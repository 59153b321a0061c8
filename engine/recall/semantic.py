"""Semantic arm: nearest facts by cosine over the HNSW index, filters inside the scan.

`hnsw.iterative_scan = relaxed_order` (pgvector >= 0.8) keeps scanning the graph until
enough rows pass the bank/type/tag filters, instead of returning the ef_search nearest of
all banks and filtering afterwards (which starves a small bank in a big table). Relaxed order
may return rows slightly out of order, so the materialised hits are sorted again.
`hnsw.ef_search` follows the request budget. Both are SET LOCAL, hence the transaction,
unless the connection started with them: the server's pool opens its connections with
SCAN_SESSION (engine/db.py `create_pool(settings=...)`), so a scan at the mid budget, most
recalls, sends its statement alone instead of BEGIN, set_config, the statement and COMMIT.
Every HNSW scan in the server process is recall's, and each states its own settings (SET
LOCAL, or these), so no other statement reads them; the worker's pool keeps the defaults.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Final

from pgvector import Vector

from engine.db import Connection
from engine.recall.filters import ACTIVE, filter_args, filter_sql, visible_states
from engine.recall.types import ArmHit, ArmResult, FloatVector, RecallRequest
from engine.store.memories import TagsMatch

SCAN_SETTINGS = (
    "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true),"
    " set_config('hnsw.ef_search', $1::text, true)"
)
# The mid budget's ef_search (RecallConfig: max(ef_search, arm_limit)); another value is still
# right, only scans at it then need SET LOCAL.
SESSION_EF_SEARCH: Final = 80
# Session settings for the connections of a pool that serves recall (module docstring).
SCAN_SESSION: Final = {
    "hnsw.iterative_scan": "relaxed_order",
    "hnsw.ef_search": str(SESSION_EF_SEARCH),
}


@asynccontextmanager
async def scan_settings(conn: Connection, ef_search: int, session: bool) -> AsyncIterator[None]:
    """Run an HNSW scan inside this at `ef_search` with relaxed-order iterative scanning:
    nothing is sent when the connection started with those settings (`session`: its pool was
    opened with SCAN_SESSION), else they are SET LOCAL in a transaction around it."""
    if session and ef_search == SESSION_EF_SEARCH:
        yield
        return
    async with conn.transaction():
        await conn.execute(SCAN_SETTINGS, str(ef_search))
        yield


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
    session: bool = False,
) -> ArmResult:
    """`session`: the connection started with SCAN_SESSION."""
    started = time.perf_counter()
    async with scan_settings(conn, max(ef_search, limit), session):
        rows = await conn.fetch(
            semantic_sql(request.tags_match, visible_states(request)),
            *filter_args(request),
            Vector(vector),
            limit,
            floor,
        )
    hits = [ArmHit(r["id"], float(r["similarity"])) for r in rows]
    return ArmResult("semantic", hits, (time.perf_counter() - started) * 1000)
