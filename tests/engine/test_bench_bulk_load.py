"""The 1M bench's bulk loader (bench/bulk_load.py) writes what the retain steps write: a bank
built by the engine path (bench/recall_latency.py `store_document`, one document in flight)
is deleted and loaded again by the loader, and the two are compared row by row."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from bench.bulk_indexes import drop_indexes, restore_indexes
from bench.bulk_load import load_bank, loader_connection
from bench.pooled_vectors import PooledEmbedder
from bench.recall_latency import START, store_document
from bench.synthetic_facts import generate_facts
from engine.db import Pool
from engine.embedding import Embedder
from engine.retain.gate import OrderedGate
from engine.store.banks import ensure_bank

DOCUMENT = 25

_ROWS = {
    "units": """
        SELECT id::text, concat_ws('|', document_id, chunk_id, fact_type, text, context,
               details::text, occurred_start, occurred_end, mentioned_at, metadata::text,
               tags::text, source_start, source_end, embedding::text, token_count,
               md5(token_vectors), importance, strength, valid_from, state) AS v
        FROM memory_units WHERE bank_id = $1""",
    "terms": "SELECT term || '|' || unit_id || '|' || tf AS v FROM memory_terms WHERE bank_id = $1",
    "mentions": "SELECT unit_id || '|' || entity_id AS v FROM unit_entities WHERE bank_id = $1",
    "entities": """
        SELECT concat_ws('|', id, canonical_name, normalized_name, kind, mention_count,
                         first_seen, last_seen) AS v FROM entities WHERE bank_id = $1""",
    "documents": """
        SELECT concat_ws('|', document_id, content, content_hash, mentioned_at, items::text)
        FROM documents WHERE bank_id = $1""",
    "chunks": """
        SELECT concat_ws('|', chunk_id, document_id, chunk_index, content, content_hash,
                         char_start, char_end) FROM chunks WHERE bank_id = $1""",
    "stats": "SELECT unit_count || '|' || total_terms FROM bank_stats WHERE bank_id = $1",
    "term_stats": "SELECT term || '|' || df FROM bank_term_stats WHERE bank_id = $1 AND df > 0",
    "links": """
        SELECT concat_ws('|', from_unit, to_unit, link_type, round(weight::numeric, 3))
        FROM memory_links WHERE bank_id = $1 AND link_type <> 'temporal'""",
    # Temporal ties between facts of one document go by the order the link step reads its
    # batch in (heap order, no ORDER BY), so equal-weight targets may differ: the weights
    # each fact links with must not.
    "temporal": """
        SELECT concat_ws('|', from_unit, round(weight::numeric, 3)) FROM memory_links
        WHERE bank_id = $1 AND link_type = 'temporal'""",
}


async def _snapshot(pool: Pool, bank: str) -> dict[str, list[Any]]:
    async with pool.acquire() as conn:
        return {
            name: sorted(tuple(r.values()) for r in await conn.fetch(sql, bank))
            for name, sql in _ROWS.items()
        }


async def test_bulk_loader_writes_the_rows_of_the_retain_steps(
    pool: Pool,
    database_url: str,
    embedder: Embedder,
    cpu: ThreadPoolExecutor,
    bank_id: str,
    tmp_path: Path,
) -> None:
    facts = generate_facts(3 * DOCUMENT, seed=7, start=START, days=60)[0]
    vectors, tokens = embedder.embed_with_tokens([f.fact.text for f in facts[:12]])
    pooled = PooledEmbedder(embedder, np.asarray(vectors, dtype=np.float32), tokens)
    async with pool.acquire() as conn:
        await ensure_bank(conn, bank_id)
    gate = OrderedGate(1)
    for index in range(3):
        part = facts[index * DOCUMENT : (index + 1) * DOCUMENT]
        await store_document(pool, pooled, cpu, gate, bank_id, f"doc-{index:06d}", part)
    engine = await _snapshot(pool, bank_id)
    assert len(engine["units"]) == 75 and len(engine["links"]) > 75 * 5

    async with pool.acquire() as conn:
        await conn.execute("DELETE FROM documents WHERE bank_id = $1", bank_id)
        await conn.execute("DELETE FROM entities WHERE bank_id = $1", bank_id)
        await drop_indexes(conn, tmp_path / "dropped.json")
    loader = await loader_connection(database_url)
    try:
        assert await load_bank(loader, pooled.for_loader(), bank_id, facts, DOCUMENT) == 75
        assert await load_bank(loader, pooled.for_loader(), bank_id, facts, DOCUMENT) == 0
    finally:
        await loader.close()
    async with pool.acquire() as conn:
        await restore_indexes(conn, tmp_path / "dropped.json", "64MB")
        assert await conn.fetchval(
            "SELECT count(*) FROM pg_indexes WHERE indexname = 'memory_units_embedding'"
        )
    bulk = await _snapshot(pool, bank_id)
    differences = {
        name: ([r for r in engine[name] if r not in bulk[name]][:2], len(bulk[name]))
        for name in _ROWS
        if bulk[name] != engine[name]
    }
    assert differences == {}
