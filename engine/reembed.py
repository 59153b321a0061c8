"""Switch a database to another embedding model while recall keeps answering.

A run (workflows/reembed.py drives it) goes through four steps:

1. `begin`: add `embedding_next`/`token_vectors_next` columns of the new model's dimension
   beside the live ones, and a trigger that clears a fact's new vector when its text changes.
2. `fill_batch`, repeated: embed facts (and mental models) that have no new vector yet, in
   id order. Facts retained meanwhile get none and are picked up by a later batch. Recall
   reads only the old columns, so it answers throughout.
3. `build_index` then `switch`: the HNSW index is built on the new column without blocking
   writes; then one short transaction, with writers held off, embeds what is left (a few
   facts and the staged rows of retains in flight), swaps the columns and indexes, and
   records the new vector space in `engram_meta`.
4. `sweep`: every process follows the switch within `FOLLOW_INTERVAL` (engine/live_embedder.py); a
   write made in that gap by a process still on the old model is re-embedded here.

A run is resumable (every step is idempotent) and cancellable before the switch
(`abandon` drops the new columns; nothing else changed).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import numpy as np
from pgvector import Vector

from engine.db import Connection, Pool
from engine.embedding import Embedder
from engine.errors import Conflict, NotFound
from engine.recall.vectors import encode_token_vectors

log = logging.getLogger("engram.reembed")

# Held (as a transaction lock) by `begin` and `switch`, so two runs never interleave them.
REEMBED_LOCK = 0x656E_7265_656D_6264  # "enreembd"
# Facts per `fill_batch`: ~0.5-1 s of embedding on one core, a short update.
BATCH_SIZE = 256
# The switch embeds what is left while writers wait; the fill loop hands over below this.
SWITCH_REMAINDER = 512
# How often a process checks the database's vector space (`LiveEmbedder.watch`). The sweep
# waits a few of these after the switch before re-embedding writes made in the gap.
FOLLOW_INTERVAL = timedelta(seconds=5)
SWEEP_GRACE = 3 * FOLLOW_INTERVAL

_RUN_COLUMNS = (
    "id::text, model, space, dimension, from_space, state, total, done, started_at,"
    " switched_at, finished_at, error"
)


@dataclass(frozen=True)
class ReembedRun:
    id: str
    model: str
    space: str
    dimension: int
    from_space: str
    state: str
    total: int
    done: int
    started_at: datetime
    switched_at: datetime | None
    finished_at: datetime | None
    error: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "model": self.model,
            "space": self.space,
            "dimension": self.dimension,
            "from_space": self.from_space,
            "state": self.state,
            "total": self.total,
            "done": self.done,
            "started_at": self.started_at.isoformat(),
            "switched_at": self.switched_at.isoformat() if self.switched_at else None,
            "finished_at": self.finished_at.isoformat() if self.finished_at else None,
            "error": self.error,
        }


async def latest_run(conn: Connection) -> ReembedRun | None:
    row = await conn.fetchrow(
        f"SELECT {_RUN_COLUMNS} FROM reembed_runs ORDER BY started_at DESC LIMIT 1"
    )
    return ReembedRun(**dict(row)) if row is not None else None


async def get_run(conn: Connection, run_id: str) -> ReembedRun:
    row = await conn.fetchrow(f"SELECT {_RUN_COLUMNS} FROM reembed_runs WHERE id = $1", run_id)
    if row is None:
        raise NotFound("re-embedding run", run_id)
    return ReembedRun(**dict(row))


async def stored_space(conn: Connection) -> tuple[str | None, str | None]:
    """The database's vector space and the model name that made it (None before a run)."""
    rows = await conn.fetch(
        "SELECT key, value FROM engram_meta WHERE key IN ('embedding_space', 'embedding_model')"
    )
    found = {row["key"]: row["value"] for row in rows}
    return found.get("embedding_space"), found.get("embedding_model")


_DROP_NEXT = """
DROP TRIGGER IF EXISTS memory_units_reembed_stale ON memory_units;
DROP INDEX IF EXISTS memory_units_embedding_next;
DROP INDEX IF EXISTS memory_units_embedding_next_observations;
DROP INDEX IF EXISTS memory_units_reembed_todo;
ALTER TABLE memory_units DROP COLUMN IF EXISTS embedding_next;
ALTER TABLE memory_units DROP COLUMN IF EXISTS token_vectors_next;
ALTER TABLE mental_models DROP COLUMN IF EXISTS embedding_next;
"""

_ADD_NEXT = """
ALTER TABLE memory_units ADD COLUMN embedding_next halfvec({dim});
ALTER TABLE memory_units ALTER COLUMN embedding_next SET STORAGE MAIN;
ALTER TABLE memory_units ADD COLUMN token_vectors_next bytea;
ALTER TABLE memory_units ALTER COLUMN token_vectors_next SET STORAGE EXTERNAL;
ALTER TABLE mental_models ADD COLUMN embedding_next vector({dim});
CREATE INDEX memory_units_reembed_todo ON memory_units (id) WHERE embedding_next IS NULL;
CREATE OR REPLACE FUNCTION engram_reembed_stale() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.text IS DISTINCT FROM OLD.text THEN
        NEW.embedding_next := NULL;
        NEW.token_vectors_next := NULL;
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER memory_units_reembed_stale BEFORE UPDATE OF text ON memory_units
    FOR EACH ROW EXECUTE FUNCTION engram_reembed_stale();
"""


async def begin(pool: Pool, model: str, target: Embedder) -> ReembedRun:
    """Start a run to `model` (or return the one already filling for it)."""
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", REEMBED_LOCK)
        active = await conn.fetchrow(
            f"SELECT {_RUN_COLUMNS} FROM reembed_runs WHERE state = 'filling'"
        )
        if active is not None:
            run = ReembedRun(**dict(active))
            if run.model != model:
                raise Conflict(
                    f"a re-embedding to {run.model!r} is running ({run.done}/{run.total});"
                    " cancel it before starting another"
                )
            return run
        space, _ = await stored_space(conn)
        if space == target.space:
            raise Conflict(f"the database's vectors are already in {target.space!r}")
        await conn.execute(_DROP_NEXT)
        await conn.execute(_ADD_NEXT.replace("{dim}", str(target.dimension)))
        total = await conn.fetchval(
            "SELECT (SELECT count(*) FROM memory_units)"
            " + (SELECT count(*) FROM mental_models WHERE embedding IS NOT NULL)"
        )
        row = await conn.fetchrow(
            "INSERT INTO reembed_runs (id, model, space, dimension, from_space, state, total)"
            f" VALUES (gen_random_uuid(), $1, $2, $3, $4, 'filling', $5) RETURNING {_RUN_COLUMNS}",
            model,
            target.space,
            target.dimension,
            space or "",
            total,
        )
    assert row is not None
    log.info("re-embedding %d vectors into %s", total, target.space)
    return ReembedRun(**dict(row))


async def _embed(
    embedder: Embedder, cpu: Executor, texts: Sequence[str]
) -> tuple[list[Vector], list[bytes]]:
    if not texts:
        return [], []
    loop = asyncio.get_running_loop()
    vectors, tokens = await loop.run_in_executor(cpu, embedder.embed_with_tokens, list(texts))
    return (
        [Vector(np.asarray(v, dtype=np.float32)) for v in vectors],
        [encode_token_vectors(t) for t in tokens],
    )


# The text is compared again on write: a fact corrected while its batch was embedding keeps
# no vector of its old text (the trigger clears one written before the correction).
_SET_UNITS = """
UPDATE memory_units AS m SET embedding_next = v.embedding, token_vectors_next = v.tokens
FROM unnest($1::uuid[], $2::text[], $3::vector[], $4::bytea[]) AS v(id, text, embedding, tokens)
WHERE m.id = v.id AND m.text = v.text
"""
_SET_MODELS = """
UPDATE mental_models AS m SET embedding_next = v.embedding
FROM unnest($1::text[], $2::text[], $3::text[], $4::vector[]) AS v(bank_id, id, content, embedding)
WHERE m.bank_id = v.bank_id AND m.id = v.id AND m.content = v.content
"""


async def _fill_units(conn: Connection, embedder: Embedder, cpu: Executor, limit: int) -> int:
    rows = await conn.fetch(
        "SELECT id, text FROM memory_units WHERE embedding_next IS NULL ORDER BY id LIMIT $1",
        limit,
    )
    texts = [row["text"] for row in rows]
    vectors, tokens = await _embed(embedder, cpu, texts)
    await conn.execute(_SET_UNITS, [row["id"] for row in rows], texts, vectors, tokens)
    return len(rows)


async def _fill_models(conn: Connection, embedder: Embedder, cpu: Executor, limit: int) -> int:
    rows = await conn.fetch(
        "SELECT bank_id, id, content FROM mental_models"
        " WHERE embedding IS NOT NULL AND embedding_next IS NULL AND content <> ''"
        " ORDER BY bank_id, id LIMIT $1",
        limit,
    )
    texts = [row["content"] for row in rows]
    vectors, _ = await _embed(embedder, cpu, texts)
    await conn.execute(
        _SET_MODELS,
        [row["bank_id"] for row in rows],
        [row["id"] for row in rows],
        texts,
        vectors,
    )
    return len(rows)


_REMAINING = (
    "SELECT (SELECT count(*) FROM memory_units WHERE embedding_next IS NULL)"
    " + (SELECT count(*) FROM mental_models"
    "    WHERE embedding IS NOT NULL AND embedding_next IS NULL AND content <> '')"
)


async def fill_batch(
    pool: Pool, run_id: str, embedder: Embedder, cpu: Executor, limit: int = BATCH_SIZE
) -> tuple[int, int]:
    """Embed up to `limit` vectors still missing; returns (embedded, still missing)."""
    async with pool.acquire() as conn:
        run = await get_run(conn, run_id)
        if run.state != "filling":
            return 0, 0
        _check_target(run, embedder)
        embedded = await _fill_units(conn, embedder, cpu, limit)
        if embedded < limit:
            embedded += await _fill_models(conn, embedder, cpu, limit - embedded)
        remaining = int(await conn.fetchval(_REMAINING))
        await conn.execute(
            "UPDATE reembed_runs SET done = total - $2, total = greatest(total, done + $2)"
            " WHERE id = $1",
            run_id,
            remaining,
        )
    return embedded, remaining


def _check_target(run: ReembedRun, embedder: Embedder) -> None:
    if embedder.space != run.space:
        raise Conflict(f"run {run.id} embeds into {run.space!r}, not {embedder.space!r}")


# The indexes on the new column, as the live column has them (migrations 0026 and 0032).
_NEXT_INDEXES = {
    "memory_units_embedding_next": "",
    "memory_units_embedding_next_observations": " WHERE fact_type = 'observation'",
}


async def build_index(pool: Pool) -> None:
    """The HNSW indexes on the new column, built without blocking writes (facts inserted
    meanwhile are indexed as they arrive). A build that died half-way left an invalid
    index: it is dropped and built again."""
    async with pool.acquire() as conn:
        for name, predicate in _NEXT_INDEXES.items():
            valid = await conn.fetchval(
                "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
                " WHERE c.relname = $1",
                name,
            )
            if valid is False:
                await conn.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
            if valid is not True:
                await conn.execute(
                    f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name}"
                    f" ON memory_units USING hnsw (embedding_next halfvec_cosine_ops){predicate}"
                )


_SWAP = """
DROP TRIGGER memory_units_reembed_stale ON memory_units;
DROP INDEX memory_units_reembed_todo;
DROP INDEX memory_units_embedding;
ALTER TABLE memory_units DROP COLUMN embedding;
ALTER TABLE memory_units RENAME COLUMN embedding_next TO embedding;
ALTER TABLE memory_units ALTER COLUMN embedding SET NOT NULL;
ALTER INDEX memory_units_embedding_next RENAME TO memory_units_embedding;
ALTER INDEX memory_units_embedding_next_observations
    RENAME TO memory_units_embedding_observations;
ALTER TABLE memory_units DROP COLUMN token_vectors;
ALTER TABLE memory_units RENAME COLUMN token_vectors_next TO token_vectors;
ALTER TABLE mental_models DROP COLUMN embedding;
ALTER TABLE mental_models RENAME COLUMN embedding_next TO embedding;
ALTER TABLE staged_facts ALTER COLUMN embedding TYPE halfvec({dim}) USING NULL;
"""
_META = """
INSERT INTO engram_meta (key, value) VALUES
    ('embedding_space', $1), ('embedding_dim', $2), ('embedding_model', $3)
ON CONFLICT (key) DO UPDATE SET value = excluded.value
"""


async def switch(pool: Pool, run_id: str, embedder: Embedder, cpu: Executor) -> ReembedRun:
    """Swap the new vectors in, in one transaction; idempotent (a switched run is returned
    as it is)."""
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", REEMBED_LOCK)
        run = await get_run(conn, run_id)
        if run.state != "filling":
            return run
        _check_target(run, embedder)
        # Writers wait from here to the commit; readers (recall) do not.
        await conn.execute(
            "LOCK TABLE memory_units, mental_models, staged_facts IN SHARE ROW EXCLUSIVE MODE"
        )
        while await _fill_units(conn, embedder, cpu, BATCH_SIZE) == BATCH_SIZE:
            pass
        while await _fill_models(conn, embedder, cpu, BATCH_SIZE) == BATCH_SIZE:
            pass
        staged = await conn.fetch(
            "SELECT fact_id, fact->>'text' AS text FROM staged_facts WHERE embedding IS NOT NULL"
        )
        await conn.execute(_SWAP.replace("{dim}", str(run.dimension)))
        texts = [row["text"] for row in staged]
        vectors, tokens = await _embed(embedder, cpu, texts)
        await conn.execute(
            "UPDATE staged_facts AS s SET embedding = v.embedding, token_vectors = v.tokens"
            " FROM unnest($1::uuid[], $2::vector[], $3::bytea[]) AS v(id, embedding, tokens)"
            " WHERE s.fact_id = v.id",
            [row["fact_id"] for row in staged],
            vectors,
            tokens,
        )
        await conn.execute(_META, run.space, str(run.dimension), run.model)
        row = await conn.fetchrow(
            "UPDATE reembed_runs SET state = 'switched', switched_at = now(), done = total"
            f" WHERE id = $1 RETURNING {_RUN_COLUMNS}",
            run_id,
        )
        assert row is not None
        await conn.execute("NOTIFY engram_embedding")
    log.info("switched the database's vectors to %s", run.space)
    return ReembedRun(**dict(row))


async def sweep(
    pool: Pool, run_id: str, embedder: Embedder, cpu: Executor, after_id: str | None = None
) -> str | None:
    """Re-embed, one batch per call, what was written from the switch on (a process may
    have written with the old model until it followed). Returns the last id done, None at
    the end (and the run is then `done`)."""
    async with pool.acquire() as conn:
        run = await get_run(conn, run_id)
        if run.state != "switched" or run.switched_at is None:
            return None
        _check_target(run, embedder)
        since = run.switched_at - timedelta(seconds=1)
        rows = await conn.fetch(
            "SELECT id, text FROM memory_units"
            " WHERE (created_at >= $1 OR updated_at >= $1) AND id > $2::uuid"
            " ORDER BY id LIMIT $3",
            since,
            after_id or "00000000-0000-0000-0000-000000000000",
            BATCH_SIZE,
        )
        texts = [row["text"] for row in rows]
        vectors, tokens = await _embed(embedder, cpu, texts)
        await conn.execute(
            "UPDATE memory_units AS m SET embedding = v.embedding, token_vectors = v.tokens"
            " FROM unnest($1::uuid[], $2::text[], $3::vector[], $4::bytea[])"
            " AS v(id, text, embedding, tokens) WHERE m.id = v.id AND m.text = v.text",
            [row["id"] for row in rows],
            texts,
            vectors,
            tokens,
        )
        if len(rows) == BATCH_SIZE:
            return str(rows[-1]["id"])
        models = await conn.fetch(
            "SELECT bank_id, id, content FROM mental_models"
            " WHERE updated_at >= $1 AND content <> ''",
            since,
        )
        model_vectors, _ = await _embed(embedder, cpu, [row["content"] for row in models])
        await conn.execute(
            "UPDATE mental_models AS m SET embedding = v.embedding"
            " FROM unnest($1::text[], $2::text[], $3::text[], $4::vector[])"
            " AS v(bank_id, id, content, embedding)"
            " WHERE m.bank_id = v.bank_id AND m.id = v.id AND m.content = v.content",
            [row["bank_id"] for row in models],
            [row["id"] for row in models],
            [row["content"] for row in models],
            model_vectors,
        )
        await conn.execute(
            "UPDATE reembed_runs SET state = 'done', finished_at = now() WHERE id = $1", run_id
        )
    return None


async def abandon(pool: Pool, run_id: str, reason: str) -> None:
    """Cancel a run before its switch: the new columns go, the live vectors never changed.
    A switched run is past the point of return and is left to finish."""
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", REEMBED_LOCK)
        run = await get_run(conn, run_id)
        if run.state != "filling":
            return
        await conn.execute(_DROP_NEXT)
        await conn.execute(
            "UPDATE reembed_runs SET state = 'cancelled', finished_at = now(), error = $2"
            " WHERE id = $1",
            run_id,
            reason,
        )
