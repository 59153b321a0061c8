"""Concurrent entity resolution of batches that share names, in opposite orders, neither
deadlocks nor creates a name twice."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from engine.db import Pool
from engine.retain.payloads import ChunkJob, ExtractionBatch, StagedFacts
from engine.retain.resolve import resolve_staged_entities
from engine.retain.staging import stage_extracted
from engine.store.banks import ensure_bank
from engine.types import ExtractedEntity, ExtractedFact, ItemContext

# fmt: off
NAMES = [
    "Alice", "Bruno", "Chiara", "Dmitri", "Esther", "Farouk", "Gisela", "Hiroshi", "Ingrid",
    "Jasper", "Kwame", "Ludmila",
]
# fmt: on
WHEN = datetime(2024, 5, 1, tzinfo=UTC)
ROUNDS = 6


async def stage(pool: Pool, bank: str, doc: str, names: list[str]) -> StagedFacts:
    """One fact per name, in the given order."""
    chunk = ChunkJob(bank, doc, f"{doc}-0", "text", WHEN, content_hash=doc)

    async def extract(job: ChunkJob, item: ItemContext) -> list[ExtractedFact]:
        return [
            ExtractedFact(f"{n} was there.", entities=[ExtractedEntity(n, "person")]) for n in names
        ]

    async with pool.acquire() as conn:
        return await stage_extracted(conn, ExtractionBatch("op", "local", [chunk]), extract)


async def resolve(pool: Pool, staged: StagedFacts) -> int:
    async with pool.acquire() as conn, conn.transaction():
        return await resolve_staged_entities(conn, staged)


async def test_opposite_orders_resolve_without_deadlock(pool: Pool, bank_id: str) -> None:
    # A deadlock needs the two transactions to interleave just so: several rounds make the
    # old (unordered) code fail nearly every run.
    for round_ in range(ROUNDS):
        bank = f"{bank_id}-{round_}"
        async with pool.acquire() as conn:
            await ensure_bank(conn, bank)
        forward = await stage(pool, bank, "forward", NAMES)
        backward = await stage(pool, bank, "backward", NAMES[::-1])
        created = await asyncio.gather(resolve(pool, forward), resolve(pool, backward))
        async with pool.acquire() as conn:
            counts = await conn.fetch(
                "SELECT count(*) AS n FROM entities WHERE bank_id = $1 GROUP BY normalized_name",
                bank,
            )
            staged = await conn.fetch(
                "SELECT entity_ids FROM staged_facts WHERE bank_id = $1", bank
            )
        assert sum(created) == len(NAMES) == len(counts)
        assert all(r["n"] == 1 for r in counts)
        assert all(len(r["entity_ids"]) == 1 for r in staged)
        assert len({r["entity_ids"][0] for r in staged}) == len(NAMES)
