"""The upsert applies its batch's BM25 statistics itself at the end (migration 0028), not
through the insert triggers: after concurrent batches of one bank, a replaced document and
an upsert whose facts are already stored, `bank_stats` and `bank_term_stats` still equal what
`memory_units` and `memory_terms` hold."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

from engine.db import Pool
from engine.embedding import Embedder
from engine.retain.gate import OrderedGate
from engine.retain.payloads import (
    ChunkJob,
    DocumentPlan,
    ExtractionBatch,
    RetainItem,
    UpsertDocument,
    UpsertResult,
)
from engine.retain.staging import embed_staged, stage_extracted
from engine.retain.upsert import upsert_documents
from engine.store.banks import ensure_bank
from engine.types import ExtractedFact, ItemContext

WHEN = datetime(2024, 5, 1, tzinfo=UTC)
BATCHES = 4
DOCUMENTS = 3


def sentence(document: str, n: int) -> str:
    # Shared words ("Caroline", "support", "group") put every batch on the same term rows.
    return f"Caroline went to the support group {document} on day {n}."


async def stage_job(
    pool: Pool, embedder: Embedder, cpu: ThreadPoolExecutor, bank: str, doc: str, chunk: str
) -> UpsertDocument:
    """A document of one chunk with two staged, embedded facts."""
    job = ChunkJob(bank, doc, chunk, sentence(doc, 0), WHEN, content_hash=chunk)

    async def extract(c: ChunkJob, item: ItemContext) -> list[ExtractedFact]:
        return [ExtractedFact(sentence(chunk, n)) for n in range(2)]

    async with pool.acquire() as conn:
        staged = await stage_extracted(conn, ExtractionBatch("op", "local", [job]), extract)
    await embed_staged(pool, embedder, cpu, staged, OrderedGate(1))
    return UpsertDocument(
        bank, "op", DocumentPlan(doc, [job], [], []), [RetainItem(job.text, WHEN)]
    )


async def upsert(pool: Pool, jobs: list[UpsertDocument]) -> list[UpsertResult]:
    async with pool.acquire() as conn:
        return await upsert_documents(conn, jobs)


async def assert_statistics_exact(pool: Pool, bank: str) -> None:
    stats = await pool.fetchrow(
        "SELECT unit_count, total_terms FROM bank_stats WHERE bank_id = $1", bank
    )
    actual = await pool.fetchrow(
        "SELECT count(*) AS n, sum(token_count) AS t FROM memory_units WHERE bank_id = $1", bank
    )
    assert stats is not None and actual is not None
    assert (stats["unit_count"], stats["total_terms"]) == (actual["n"], actual["t"])
    df = await pool.fetch(
        "SELECT term, df FROM bank_term_stats WHERE bank_id = $1 AND df <> 0 ORDER BY term", bank
    )
    counted = await pool.fetch(
        "SELECT term, count(*) AS df FROM memory_terms WHERE bank_id = $1"
        " GROUP BY term ORDER BY term",
        bank,
    )
    assert [tuple(r) for r in df] == [tuple(r) for r in counted]


async def test_concurrent_batches_keep_statistics_exact(
    pool: Pool, embedder: Embedder, cpu: ThreadPoolExecutor, bank_id: str
) -> None:
    async with pool.acquire() as conn:
        await ensure_bank(conn, bank_id)
    batches = [
        [
            await stage_job(pool, embedder, cpu, bank_id, f"d{b}-{d}", f"d{b}-{d}-0")
            for d in range(DOCUMENTS)
        ]
        for b in range(BATCHES)
    ]
    results = await asyncio.gather(*(upsert(pool, jobs) for jobs in batches))
    assert [r.facts_added for rs in results for r in rs] == [2] * (BATCHES * DOCUMENTS)
    await assert_statistics_exact(pool, bank_id)

    # Staged again with the same (deterministic) fact ids: nothing is inserted twice, so
    # nothing is counted twice.
    again = await stage_job(pool, embedder, cpu, bank_id, "d0-0", "d0-0-0")
    await upsert(pool, [again])
    await assert_statistics_exact(pool, bank_id)

    # A replaced document: its old facts go (delete triggers), new ones come (deferred).
    new = await stage_job(pool, embedder, cpu, bank_id, "d1-0", "d1-0-1")
    replaced = UpsertDocument(
        bank_id, "op", DocumentPlan("d1-0", new.plan.new_chunks, [], ["d1-0-0"]), new.items
    )
    [result] = await upsert(pool, [replaced])
    assert (result.facts_added, result.facts_removed) == (2, 2)
    await assert_statistics_exact(pool, bank_id)
    assert (
        await pool.fetchval("SELECT count(*) FROM memory_units WHERE bank_id = $1", bank_id)
        == BATCHES * DOCUMENTS * 2
    )
