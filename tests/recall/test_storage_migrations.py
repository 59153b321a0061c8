"""Migrations 0026 and 0027: a database written before them (float32 sentence embeddings,
full-width int4 token vectors) is converted in place to halfvec embeddings and half-width
token vectors, byte for byte what retain now writes, and keeps answering recalls through
its HNSW index."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from numpy.typing import NDArray
from pgvector import Vector
from support.old_schema import migrate_before
from temporalio.testing import WorkflowEnvironment

from engine.db import create_pool, migrate
from engine.embedding import Embedder
from engine.recall.vectors import encode_token_vectors
from engine.store.banks import ensure_bank
from engram.postgres import EmbeddedPostgres
from recall.recall_support import (
    OLD_FORMAT_FACTS,
    OLD_FORMAT_QUERY,
    recall_app,
    traced_recall,
)

_INSERT = """
INSERT INTO memory_units (id, bank_id, fact_type, text, embedding, token_vectors, token_count)
VALUES ($1, $2, 'world', $3, $4::real[]::vector, $5, 8)
"""
_COLUMN_TYPE = """
SELECT format_type(atttypid, atttypmod) FROM pg_attribute
WHERE attrelid = $1::regclass AND attname = 'embedding'
"""


def full_width_blob(tokens: NDArray[np.float32]) -> bytes:
    """Token vectors as stored from migration 0014 to 0027: int4 codes of every dimension,
    two to a byte (high nibble first), then float16 row scales."""
    scales = (np.maximum(np.abs(tokens).max(axis=1), 1e-12) / 127.0).astype(np.float16)
    steps = 16.0 * scales.astype(np.float32)
    codes = np.clip(np.floor(tokens / steps[:, None]), -8, 7).astype(np.int8)
    if codes.shape[1] % 2:
        codes = np.pad(codes, ((0, 0), (0, 1)))
    packed = (codes[:, 0::2] << 4) | (codes[:, 1::2] & 0x0F)
    blob: bytes = packed.astype(np.int8).tobytes() + scales.tobytes()
    return blob


async def test_old_rows_are_converted_and_the_bank_keeps_answering(
    tmp_path: Path,
    postgres: EmbeddedPostgres,
    temporal_env: WorkflowEnvironment,
    embedder: Embedder,
    cpu: ThreadPoolExecutor,
) -> None:
    dsn = postgres.create_database(f"t_half_{uuid.uuid4().hex[:10]}")
    await migrate_before(dsn, embedder.dimension, 26)
    pooled, tokens = embedder.embed_with_tokens(list(OLD_FORMAT_FACTS))
    ids = [str(uuid.uuid4()) for _ in OLD_FORMAT_FACTS]
    bank = "before-0026"
    pool = await create_pool(dsn, max_size=4)
    try:
        async with pool.acquire() as conn:
            await ensure_bank(conn, bank)
            for fact_id, text, vector, matrix in zip(
                ids, OLD_FORMAT_FACTS, pooled, tokens, strict=True
            ):
                blob = full_width_blob(matrix)
                await conn.execute(_INSERT, fact_id, bank, text, vector.tolist(), blob)

        applied = await migrate(dsn, embedder.dimension, embedder.space)
        assert applied[:1] == ["0026_compact_vectors.sql"]
        async with pool.acquire() as conn:
            dim = embedder.dimension
            assert await conn.fetchval(_COLUMN_TYPE, "memory_units") == f"halfvec({dim})"
            assert await conn.fetchval(_COLUMN_TYPE, "staged_facts") == f"halfvec({dim})"
            stored = {
                str(r["id"]): (r["token_vectors"], r["embedding"].to_numpy())
                for r in await conn.fetch("SELECT id, token_vectors, embedding FROM memory_units")
            }
            # A query vector as the arms pass it (a parameter the column types) and as a
            # float32 `vector` (cast implicitly) are both ordered through the halfvec index.
            for operand in ("$1", "$1::vector"):
                async with conn.transaction():
                    await conn.execute("SET LOCAL enable_seqscan = off")
                    plan = await conn.fetch(
                        f"EXPLAIN SELECT id FROM memory_units ORDER BY embedding <=> {operand}"
                        " LIMIT 3",
                        Vector(pooled[0]),
                    )
                assert "Index Scan using memory_units_embedding" in plan[1][0], plan
        for fact_id, vector, matrix in zip(ids, pooled, tokens, strict=True):
            blob, embedding = stored[fact_id]
            assert blob == encode_token_vectors(matrix)
            assert np.abs(embedding.astype(np.float32) - vector).max() < 1e-3

        application = recall_app(tmp_path, pool, temporal_env, embedder, cpu)
        body = await traced_recall(application, bank, OLD_FORMAT_QUERY)
        assert body["results"][0]["id"] == ids[0]
        assert body["trace"]["rerank"]["reranker"] == "maxsim"
    finally:
        await pool.close()


async def test_a_model_of_odd_half_width_gets_its_rows_padded(postgres: EmbeddedPostgres) -> None:
    """dim 10 packs a row in 5 bytes: the last 3 (dimensions 4-9) are kept, byte for byte
    what retain writes."""
    dimension = 10
    dsn = postgres.create_database(f"t_half_{uuid.uuid4().hex[:10]}")
    await migrate_before(dsn, dimension, 26)
    rng = np.random.default_rng(3)
    matrix = rng.standard_normal((3, dimension)).astype(np.float32)
    pool = await create_pool(dsn, max_size=1)
    try:
        async with pool.acquire() as conn:
            await ensure_bank(conn, "odd")
            embedding = [1.0] * dimension
            await conn.execute(
                _INSERT, str(uuid.uuid4()), "odd", "x", embedding, full_width_blob(matrix)
            )
            await migrate(dsn, dimension)
            blob = await conn.fetchval("SELECT token_vectors FROM memory_units")
    finally:
        await pool.close()
    assert blob == encode_token_vectors(matrix)


async def test_a_running_re_embedding_refills_its_next_vectors_as_halfvec(
    postgres: EmbeddedPostgres,
) -> None:
    """A re-embedding run that had filled float32 and full-width next vectors: the migration
    empties them (the run fills them again) and types the column as the run now adds it."""
    dimension = 8
    dsn = postgres.create_database(f"t_half_{uuid.uuid4().hex[:10]}")
    await migrate_before(dsn, dimension, 26)
    pool = await create_pool(dsn, max_size=1)
    try:
        async with pool.acquire() as conn:
            await ensure_bank(conn, "next")
            await conn.execute(
                "ALTER TABLE memory_units ADD COLUMN embedding_next vector(12),"
                " ADD COLUMN token_vectors_next bytea;"
                " CREATE INDEX memory_units_embedding_next ON memory_units"
                " USING hnsw (embedding_next vector_cosine_ops)"
            )
            fact_id = str(uuid.uuid4())
            await conn.execute(_INSERT, fact_id, "next", "x", [1.0] * dimension, b"")
            await conn.execute(
                "UPDATE memory_units SET embedding_next = $1::real[]::vector,"
                " token_vectors_next = '\\x0102'",
                [1.0] * 12,
            )
            await migrate(dsn, dimension)
            row = await conn.fetchrow(
                "SELECT embedding_next, token_vectors_next, token_vectors FROM memory_units"
            )
            next_type = await conn.fetchval(
                _COLUMN_TYPE.replace("'embedding'", "'embedding_next'"), "memory_units"
            )
    finally:
        await pool.close()
    assert next_type == "halfvec(12)"
    assert row is not None
    assert row["embedding_next"] is None and row["token_vectors_next"] is None
    assert row["token_vectors"] == b""
