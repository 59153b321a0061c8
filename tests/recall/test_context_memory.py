"""The rerank's context from the bank held in memory (engine/recall/context_memory.py): the same
neighbours and versions as NEIGHBOURS_SQL, ties at one timestamp and the scan bound included."""

from __future__ import annotations

import random
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import numpy as np

from engine.db import Pool
from engine.embedding import Embedder
from engine.recall.candidates import fetch_rows
from engine.recall.config import RecallConfig
from engine.recall.context import NEIGHBOURS_SQL, Around, around_of
from engine.recall.context_memory import held_neighbours
from engine.recall.graph_cache import graph_cache_for
from engine.recall.graph_memory import BankGraph
from recall.recall_support import Banks

T0 = datetime(2024, 5, 2, 18, 0, tzinfo=UTC)
GAP = timedelta(hours=1)


Message = tuple[str, str, datetime | None, int, dict[str, str], list[str], int]


def _messages() -> list[Message]:
    """(document, context, mentioned_at, chunks, metadata, tags, facts per chunk) per document:
    two threads told at one moment (ties), messages at the gap's edges either side, another
    context and other tags at the same moment, and an undated document of seven chunks."""
    docs: list[Message] = [
        (f"a-{n:02d}", "chat", T0, 1, {"thread": "a"}, [], 1 + n % 3) for n in range(12)
    ]
    docs += [(f"b-{n:02d}", "chat", T0, 1, {"thread": "b"}, [], 2) for n in range(5)]
    edges = (-GAP, -GAP + timedelta(minutes=10), timedelta(minutes=30), GAP)
    docs += [(f"e-{n}", "chat", T0 + d, 2, {"thread": "a"}, [], 2) for n, d in enumerate(edges)]
    outside = (-GAP - timedelta(microseconds=1), GAP + timedelta(microseconds=1))
    docs += [(f"o-{n}", "chat", T0 + d, 1, {"thread": "a"}, [], 1) for n, d in enumerate(outside)]
    docs += [("c-0", "email", T0, 2, {"thread": "a"}, [], 2), ("t-0", "chat", T0, 1, {}, ["x"], 2)]
    docs += [("u-0", "notes", None, 7, {}, [], 2)]
    return docs


async def _bank(pool: Pool, dimension: int) -> tuple[str, int]:
    """A bank written straight into the tables, rows inserted in shuffled order (so physical
    order is neither id nor document order); returns it and its number of facts."""
    bank = f"ctx-mem-{uuid.uuid4().hex[:8]}"
    rng = random.Random(7)
    rows = []
    for doc, context, at, chunks, metadata, tags, per_chunk in _messages():
        for c in range(chunks):
            for f in range(per_chunk):
                rows.append((doc, c, context, at, metadata, tags, rng.randrange(0, 400), f))
    rng.shuffle(rows)
    vector = np.full(dimension, 0.1, dtype=np.float32)
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("INSERT INTO banks (bank_id) VALUES ($1)", bank)
        for doc, c, context, at, metadata, tags, start, f in rows:
            await conn.execute(
                "INSERT INTO documents (bank_id, document_id) VALUES ($1, $2)"
                " ON CONFLICT DO NOTHING",
                bank,
                doc,
            )
            await conn.execute(
                "INSERT INTO chunks (bank_id, chunk_id, document_id, chunk_index, content,"
                " content_hash) VALUES ($1, $2, $3, $4, '', '') ON CONFLICT DO NOTHING",
                bank,
                f"{doc}-c{c}",
                doc,
                c,
            )
            await conn.execute(
                "INSERT INTO memory_units (id, bank_id, document_id, chunk_id, fact_type, text,"
                " context, mentioned_at, metadata, tags, source_start, embedding, state)"
                " VALUES ($1, $2, $3, $4, 'world', $5, $6, $7, $8, $9, $10, $11, $12)",
                uuid.UUID(int=rng.getrandbits(128)),
                bank,
                doc,
                f"{doc}-c{c}",
                f"{doc} {c} {f}",
                context,
                at,
                metadata,
                tags,
                start,
                vector,
                "archived" if f == 1 and c == 0 else "active",
            )
        # A fact with no chunk: on no timeline, and no candidate gets context for it.
        await conn.execute(
            "INSERT INTO memory_units (id, bank_id, fact_type, text, context, mentioned_at,"
            " embedding) VALUES ($1, $2, 'world', 'loose', 'chat', $3, $4)",
            uuid.uuid4(),
            bank,
            T0,
            vector,
        )
    return bank, len(rows) + 1


def _as_sets(around: Around) -> dict[str, list[str]]:
    """The statement's rows come in no set order: which neighbours, not their order."""
    return {fact: sorted(near) for fact, near in around.neighbours.items() if near}


async def test_the_held_bank_gives_the_statements_neighbours(
    recall_pool: Pool, embedder: Embedder, cpu: ThreadPoolExecutor
) -> None:
    bank, size = await _bank(recall_pool, embedder.dimension)
    cache = graph_cache_for(RecallConfig(), recall_pool, cpu, 64 * 2**20)
    graph = await cache.read(bank)
    assert graph is not None and len(graph.facts.ids) == size
    candidates = list(graph.facts.ids)
    async with recall_pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT id::text, document_id FROM memory_units WHERE bank_id = $1", bank
        )
    doc_of = {r["id"]: r["document_id"] for r in rows}
    own_only: dict[int, set[str]] = {}
    # (neighbours, chunks, gap, scan): the defaults, then scan bounds that cut among the 24
    # facts of thread "a" told at T0 (and one that keeps a single fact a side).
    for knobs in ((8, 2, GAP, 256), (8, 2, GAP, 12), (3, 1, GAP / 2, 5), (4, 2, GAP, 1)):
        async with recall_pool.acquire() as conn:
            sql = around_of(await conn.fetch(NEIGHBOURS_SQL, bank, candidates, *knobs))
        neighbours, chunks, gap, scan = knobs
        held = held_neighbours(
            graph.timeline,
            graph.dates,
            graph.facts.ids,
            graph.facts.index,
            candidates,
            neighbours=neighbours,
            chunks=chunks,
            gap=gap,
            scan=scan,
        )
        assert held is not None
        assert _as_sets(held) == _as_sets(sql), knobs
        assert {n: held.versions[n] for n in sql.versions} == sql.versions
        own_only[scan] = {
            fact
            for fact, near in sql.neighbours.items()
            if near
            and doc_of[fact].startswith("a-")
            and {doc_of[n] for n in near} == {doc_of[fact]}
        }
    # The bound left some of thread "a"'s facts off their timeline (their own document's
    # chunks instead), where the whole timeline gave them other documents' messages.
    assert own_only[5] - own_only[256] and own_only[12] - own_only[256]
    await cache.close()


async def _contexts(
    pool: Pool, cpu: ThreadPoolExecutor, bank: str, ids: list[str], held: BankGraph | None
) -> dict[str, list[bytes]]:
    config = RecallConfig()
    found = await fetch_rows(
        pool,
        bank,
        ids,
        token_vectors=True,
        entities=False,
        neighbours=config.context_neighbours,
        neighbour_chunks=config.context_chunks,
        conversation_gap=config.context_gap,
        conversation_scan=config.context_scan,
        held=held,
        cpu=cpu,
    )
    return {r.id: sorted(r.context_vectors) for r in found}


async def test_recall_reads_the_same_context_from_the_held_bank(
    recall_pool: Pool, cpu: ThreadPoolExecutor, banks: Banks
) -> None:
    cache = graph_cache_for(RecallConfig(), recall_pool, cpu, 64 * 2**20)
    for bank in (banks.by_message, banks.main):
        graph = await cache.read(bank)
        assert graph is not None
        ids = list(graph.facts.ids)
        from_sql = await _contexts(recall_pool, cpu, bank, ids, None)
        assert await _contexts(recall_pool, cpu, bank, ids, graph) == from_sql
        assert any(from_sql.values())
    await cache.close()
