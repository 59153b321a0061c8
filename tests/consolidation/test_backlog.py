"""The consolidation backlog as a table of its own (migration 0033): an upgraded database keeps
its waiting facts in event order, every stored fact joins the backlog, and consolidating a
fact takes it off without writing its memory_units row."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import asyncpg
from pgvector import Vector
from support.old_schema import migrate_before

from engine.consolidation.batch import consolidate_local_batch
from engine.consolidation.candidates import backlog, pending_facts
from engine.consolidation.encode import text_encoder
from engine.db import Pool, create_pool, migrate
from engine.embedding import Embedder
from engine.store.banks import ensure_bank
from engram.postgres import EmbeddedPostgres

_OLD_FACT = """
INSERT INTO memory_units (id, bank_id, fact_type, text, embedding, occurred_start,
                          consolidated_at)
VALUES ($1, $2, $3, $4, array_fill(0.1::real, ARRAY[$5::int])::vector::halfvec, $6, $7)
"""
_FACT = """
INSERT INTO memory_units (id, bank_id, fact_type, text, embedding, occurred_start)
VALUES ($1, $2, 'world', $3, $4, $5)
"""
_WAITING = """
SELECT fact_id::text, event_at FROM consolidation_backlog WHERE bank_id = $1
ORDER BY event_at, fact_id
"""
_VERSIONS = """
SELECT id::text, xmin::text, ctid::text FROM memory_units WHERE id = ANY($1::uuid[]) ORDER BY id
"""
_COLUMN = """
SELECT count(*) FROM information_schema.columns
WHERE table_name = 'memory_units' AND column_name = 'consolidated_at'
"""


def _at(day: int) -> datetime:
    return datetime(2024, 3, day, 10, tzinfo=UTC)


async def test_an_upgraded_bank_keeps_its_waiting_facts_in_event_order(
    postgres: EmbeddedPostgres, embedder: Embedder
) -> None:
    dsn = postgres.create_database(f"t_backlog_{uuid.uuid4().hex[:10]}")
    await migrate_before(dsn, embedder.dimension, 33)
    bank = "before-0033"
    late, early, done, observation = (str(uuid.uuid4()) for _ in range(4))
    old = await asyncpg.connect(dsn)
    try:
        await old.execute("INSERT INTO banks (bank_id, name) VALUES ($1, $1)", bank)
        for fact_id, kind, day, consolidated in (
            (late, "world", 9, None),
            (early, "experience", 2, None),
            (done, "world", 1, _at(5)),
            (observation, "observation", 3, None),
        ):
            await old.execute(
                _OLD_FACT,
                fact_id,
                bank,
                kind,
                f"fact {fact_id}",
                embedder.dimension,
                _at(day),
                consolidated,
            )
    finally:
        await old.close()

    applied = await migrate(dsn, embedder.dimension, embedder.space)
    assert applied[0] == "0033_consolidation_backlog.sql"
    pool = await create_pool(dsn, max_size=2)
    try:
        async with pool.acquire() as conn:
            assert await conn.fetchval(_COLUMN) == 0
            assert [tuple(r) for r in await conn.fetch(_WAITING, bank)] == [
                (early, _at(2)),
                (late, _at(9)),
            ]
            async with conn.transaction():
                taken = await pending_facts(conn, bank, 10, lock=True)
            assert [f.id for f in taken] == [early, late]

            # a new fact joins; a corrected time moves it; a deleted fact leaves
            new = str(uuid.uuid4())
            vector = Vector(embedder.embed(["a new fact"])[0])
            await conn.execute(_FACT, new, bank, "a new fact", vector, _at(5))
            await conn.execute(
                "UPDATE memory_units SET occurred_start = $2 WHERE id = $1", late, _at(4)
            )
            await conn.execute("DELETE FROM memory_units WHERE id = $1", early)
            assert [tuple(r) for r in await conn.fetch(_WAITING, bank)] == [
                (late, _at(4)),
                (new, _at(5)),
            ]
            assert await backlog(conn, bank) == 2
    finally:
        await pool.close()


async def test_consolidating_takes_facts_off_without_rewriting_them(
    pool: Pool, bank_id: str, embedder: Embedder, cpu: ThreadPoolExecutor
) -> None:
    texts = ["Carla plays tennis every weekend.", "Carla plays tennis on weekends."]
    ids = [str(uuid.uuid4()) for _ in texts]
    async with pool.acquire() as conn:
        await ensure_bank(conn, bank_id)
        for day, (fact_id, text, vector) in enumerate(
            zip(ids, texts, embedder.embed(texts), strict=True), start=1
        ):
            await conn.execute(_FACT, fact_id, bank_id, text, Vector(vector), _at(day))
        versions = await conn.fetch(_VERSIONS, ids)
        result = await consolidate_local_batch(
            conn, bank_id, "op-backlog", 64, text_encoder(embedder, cpu)
        )
        assert (result.counts.facts, result.counts.created, result.backlog) == (2, 1, 0)
        assert await backlog(conn, bank_id) == 0
        # the facts' rows are the versions stored: no update, so no index of memory_units
        # (its HNSW graph included) was written for them
        assert await conn.fetch(_VERSIONS, ids) == versions
