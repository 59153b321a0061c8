"""Resolution against stored facts: co-occurrence evidence read from the database, aliases
written back, entities created by the batch itself, and mention counts kept by upsert."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

from engine.db import Pool
from engine.embedding import Embedder
from engine.retain.gate import OrderedGate
from engine.retain.payloads import (
    ChunkJob,
    DocumentPlan,
    ExtractionBatch,
    RetainItem,
    StagedFacts,
    UpsertDocument,
)
from engine.retain.resolve import resolve_staged_entities
from engine.retain.staging import embed_staged, stage_extracted
from engine.retain.upsert import upsert_document
from engine.store.banks import ensure_bank
from engine.types import ExtractedEntity, ExtractedFact, ItemContext

NOW = datetime(2024, 6, 1, 10, tzinfo=UTC)
LONG_AGO = NOW - timedelta(days=200)  # too old for recency to count as evidence

Fact = tuple[str, list[str]]  # text, the people it names


async def retain(
    pool: Pool,
    embedder: Embedder,
    cpu: ThreadPoolExecutor,
    bank: str,
    doc: str,
    when: datetime,
    facts: list[Fact],
) -> StagedFacts:
    """One document through stage, embed, resolve and upsert (no links)."""
    chunk = ChunkJob(bank, doc, f"{doc}-0", " ".join(t for t, _ in facts), when, content_hash=doc)

    async def extract(job: ChunkJob, item: ItemContext) -> list[ExtractedFact]:
        return [
            ExtractedFact(text, entities=[ExtractedEntity(n, "person") for n in names])
            for text, names in facts
        ]

    async with pool.acquire() as conn:
        await ensure_bank(conn, bank)
        staged = await stage_extracted(conn, ExtractionBatch("op", "local", [chunk]), extract)
    await embed_staged(pool, embedder, cpu, staged, OrderedGate(1))
    async with pool.acquire() as conn, conn.transaction():
        await resolve_staged_entities(conn, staged)
    plan = DocumentPlan(doc, [chunk], [], [])
    async with pool.acquire() as conn:
        await upsert_document(conn, UpsertDocument(bank, "op", plan, [RetainItem("x", when)]))
    return staged


async def entities(pool: Pool, bank: str) -> dict[str, tuple[list[str], int]]:
    rows = await pool.fetch(
        "SELECT canonical_name, aliases, mention_count FROM entities WHERE bank_id = $1", bank
    )
    return {r["canonical_name"]: (list(r["aliases"]), r["mention_count"]) for r in rows}


async def test_given_name_merges_on_stored_cooccurrence(
    pool: Pool, embedder: Embedder, cpu: ThreadPoolExecutor, bank_id: str
) -> None:
    await retain(
        pool,
        embedder,
        cpu,
        bank_id,
        "old",
        LONG_AGO,
        [("Caroline Smith met Melanie Brown.", ["Caroline Smith", "Melanie Brown"])],
    )
    # "Caroline" is named before the friend that is her evidence: the fact's order must not
    # matter, the friend's exact name resolves first.
    await retain(
        pool,
        embedder,
        cpu,
        bank_id,
        "new",
        NOW,
        [("Caroline phoned Melanie Brown.", ["Caroline", "Melanie Brown"])],
    )
    # Later, alone: the alias the merge recorded names her.
    await retain(
        pool,
        embedder,
        cpu,
        bank_id,
        "later",
        NOW,
        [("Caroline painted the fence.", ["Caroline"])],
    )
    assert await entities(pool, bank_id) == {
        "Caroline Smith": (["Caroline"], 3),
        "Melanie Brown": ([], 2),
    }


async def test_given_name_without_evidence_is_a_new_entity(
    pool: Pool, embedder: Embedder, cpu: ThreadPoolExecutor, bank_id: str
) -> None:
    await retain(
        pool,
        embedder,
        cpu,
        bank_id,
        "old",
        LONG_AGO,
        [("Caroline Smith met Melanie Brown.", ["Caroline Smith", "Melanie Brown"])],
    )
    await retain(
        pool,
        embedder,
        cpu,
        bank_id,
        "new",
        NOW,
        [("Caroline phoned Oskar Lind.", ["Caroline", "Oskar Lind"])],
    )
    assert await entities(pool, bank_id) == {
        "Caroline Smith": ([], 1),
        "Melanie Brown": ([], 1),
        "Caroline": ([], 1),
        "Oskar Lind": ([], 1),
    }


async def test_batch_sees_the_entities_it_creates(
    pool: Pool, embedder: Embedder, cpu: ThreadPoolExecutor, bank_id: str
) -> None:
    # Whichever of "Dana Weiss" and "Dana" the batch decides first (facts go in id order) is
    # new; the other is the same person by recency (both seen now), through the entity the
    # batch itself is about to create.
    staged = await retain(
        pool,
        embedder,
        cpu,
        bank_id,
        "doc",
        NOW,
        [("Dana Weiss moved to Bergen.", ["Dana Weiss"]), ("Dana bought a boat.", ["Dana"])],
    )
    [(name, (aliases, mentions))] = (await entities(pool, bank_id)).items()
    assert {name, *aliases} == {"Dana Weiss", "Dana"}
    assert mentions == 2
    async with pool.acquire() as conn:
        count = await conn.fetchval(
            "SELECT count(*) FROM unit_entities WHERE unit_id = ANY($1::uuid[])", staged.fact_ids
        )
    assert count == 2
