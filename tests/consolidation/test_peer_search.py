"""Peers of a fact naming popular entities are read among the bank's nearest facts (HNSW)
instead of through every mention of its entities: on a small bank both ways find the same
peers, and the scan settings the nearest-facts path sets are restored after it."""

from __future__ import annotations

import httpx
from consolidation_support import configure, retain

from engine.consolidation.candidates import pending_facts
from engine.consolidation.peers import peer_facts
from engine.consolidation.thresholds import CANDIDATE_FLOOR, PEER_FACTS
from engine.db import Pool

LINES = [
    "I play tennis every weekend.",
    "I play tennis on Saturdays with Alice.",
    "I started learning the cello last spring.",
    "My sister moved to Lisbon in March.",
    "I cook paella for the family on Sundays.",
    "I am training for a marathon in October.",
]
_SCAN = """
SELECT current_setting('hnsw.ef_search') || '/' || current_setting('hnsw.iterative_scan')
       || '/' || current_setting('hnsw.max_scan_tuples') || '/' || current_setting('enable_sort')
"""


async def test_nearest_facts_path_finds_the_entity_paths_peers(
    api: httpx.AsyncClient, pool: Pool, bank_id: str
) -> None:
    await configure(api, bank_id, enable_observations=False)
    items = [
        {"content": f"Marco: {line}", "timestamp": f"2024-03-{10 + n}T10:00:00Z"}
        for n, line in enumerate(LINES)
    ]
    # Near Marco's tennis facts but not about him: neither way may return it.
    items.append({"content": "Alice: I play tennis every weekend.", "timestamp": "2024-03-20"})
    ids = await retain(api, bank_id, items)
    assert len(ids) > len(LINES)
    await pool.execute(
        "DELETE FROM consolidation_backlog WHERE bank_id = $1 AND fact_id <> $2::uuid",
        bank_id,
        ids[0],
    )
    async with pool.acquire() as conn, conn.transaction():
        [fact] = await pending_facts(conn, bank_id, 1, lock=False)
        assert fact.entity_ids  # Marco
        before = await conn.fetchval(_SCAN)
        by_entity = await peer_facts(
            conn, bank_id, fact, floor=CANDIDATE_FLOOR, limit=PEER_FACTS, scan_mentions=10**9
        )
        nearest = await peer_facts(
            conn, bank_id, fact, floor=CANDIDATE_FLOOR, limit=PEER_FACTS, scan_mentions=0
        )
        after = await conn.fetchval(_SCAN)
    assert by_entity
    assert [(p.id, round(p.similarity, 5)) for p in nearest] == [
        (p.id, round(p.similarity, 5)) for p in by_entity
    ]
    assert after == before
