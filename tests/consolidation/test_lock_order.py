"""A consolidation batch and a document upsert of the same bank, interleaved the way a bulk
import and the consolidation sweep met (LoCoMo import, deadlock detected on both sides), both
commit: consolidation takes its facts and the bank's statistics row in the order upsert does.

The interleaving is forced: a third transaction holds one BM25 statistics row, so the upsert
stops right after it took the bank's statistics row, holding key-share locks on the stored
facts its links point to (since migration 0028 it adds its statistics at its end, after the
links); the consolidation batch then starts, and the row is released once the batch waits.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import httpx
from consolidation_support import configure, retain
from support.waiting import until

from engine.consolidation.batch import consolidate_local_batch
from engine.consolidation.encode import text_encoder
from engine.db import Pool
from engine.embedding import Embedder
from engine.retain.gate import OrderedGate
from engine.retain.links import link_staged
from engine.retain.payloads import (
    ChunkJob,
    DocumentPlan,
    ExtractionBatch,
    LinkOptions,
    RetainItem,
    StagedFacts,
    UpsertDocument,
)
from engine.retain.resolve import resolve_staged_entities
from engine.retain.staging import embed_staged, stage_extracted
from engine.retain.upsert import upsert_document
from engine.text import term_frequencies
from engine.types import ExtractedEntity, ExtractedFact, ItemContext

WHEN = datetime(2024, 3, 30, 10, tzinfo=UTC)
NEW_FACT = "Marco plays tennis with Alice every weekend."


async def waiting_on_lock(pool: Pool, pid: int) -> None:
    await until(
        lambda: pool.fetchval("SELECT wait_event_type FROM pg_stat_activity WHERE pid = $1", pid),
        lambda state: state == "Lock",
        f"backend {pid} waiting for a lock",
        every=0.05,
    )


async def stage_linked_document(
    pool: Pool, embedder: Embedder, cpu: ThreadPoolExecutor, bank: str
) -> UpsertDocument:
    """A new document whose fact names Marco, so it links to his stored facts."""
    chunk = ChunkJob(bank, "new-doc", "new-doc-0", NEW_FACT, WHEN, content_hash="new-doc")

    async def extract(job: ChunkJob, item: ItemContext) -> list[ExtractedFact]:
        return [ExtractedFact(NEW_FACT, entities=[ExtractedEntity("Marco", "person")])]

    async with pool.acquire() as conn:
        staged = await stage_extracted(conn, ExtractionBatch("op", "local", [chunk]), extract)
    await embed_staged(pool, embedder, cpu, staged, OrderedGate(1))
    async with pool.acquire() as conn, conn.transaction():
        await resolve_staged_entities(conn, StagedFacts(bank, "op", staged.fact_ids))
    assert await link_staged(pool, cpu, LinkOptions(bank, "op", staged.fact_ids)) > 0
    plan = DocumentPlan("new-doc", [chunk], [], [])
    return UpsertDocument(bank, "op", plan, [RetainItem(NEW_FACT, WHEN)])


async def test_consolidation_and_upsert_of_one_bank_both_commit(
    api: httpx.AsyncClient,
    pool: Pool,
    embedder: Embedder,
    cpu: ThreadPoolExecutor,
    bank_id: str,
) -> None:
    await configure(api, bank_id, enable_observations=False)
    stored = await retain(
        api,
        bank_id,
        [
            {
                "content": f"Marco: {text}",
                "timestamp": f"2024-03-{day}T10:00:00Z",
                "document_id": f"tennis-{day}",
            }
            for day, text in (
                ("10", "I play tennis every weekend."),
                ("17", "I play tennis on weekends."),
            )
        ],
    )
    await configure(api, bank_id, enable_observations=True)
    job = await stage_linked_document(pool, embedder, cpu, bank_id)
    shared = sorted(
        set(term_frequencies(NEW_FACT)[0])
        & {
            r["term"]
            for r in await pool.fetch(
                "SELECT term FROM bank_term_stats WHERE bank_id = $1", bank_id
            )
        }
    )
    assert shared  # "tennis", "weekend": the upsert will need their statistics rows

    async with (
        pool.acquire() as blocker,
        pool.acquire() as upserter,
        pool.acquire() as consolidator,
    ):
        block = blocker.transaction()
        await block.start()
        await blocker.execute(
            "SELECT 1 FROM bank_term_stats WHERE bank_id = $1 AND term = $2 FOR UPDATE",
            bank_id,
            shared[0],
        )
        upsert = asyncio.create_task(upsert_document(upserter, job))
        await waiting_on_lock(pool, upserter.get_server_pid())
        batch = asyncio.create_task(
            consolidate_local_batch(
                consolidator, bank_id, "op-lock-order", 10, text_encoder(embedder, cpu)
            )
        )
        await waiting_on_lock(pool, consolidator.get_server_pid())
        await block.rollback()
        # Both awaited to the end, so a failure of one leaves no statement running.
        done = await asyncio.gather(upsert, batch, return_exceptions=True)

    upserted, consolidated = done
    assert not isinstance(upserted, BaseException), repr(upserted)
    assert not isinstance(consolidated, BaseException), repr(consolidated)
    assert upserted.facts_added == 1 and upserted.links_added > 0
    assert consolidated.counts.facts == len(stored) and consolidated.counts.created == 1
    links = await pool.fetchval(
        "SELECT count(*) FROM memory_links WHERE bank_id = $1 AND to_unit = ANY($2::uuid[])",
        bank_id,
        stored,
    )
    assert links > 0
    observations = await pool.fetchval(
        "SELECT count(*) FROM memory_units WHERE bank_id = $1 AND fact_type = 'observation'",
        bank_id,
    )
    assert observations == 1
