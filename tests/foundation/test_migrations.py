"""Schema migrations: idempotent, safe from two processes at once, dimension-checked."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from pathlib import Path

import asyncpg
import numpy as np
import pytest
from support.serve import free_port

from engine.db import create_pool, load_migrations, migrate
from engine.errors import ConfigurationError
from engine.store.banks import ensure_bank
from engram.postgres import EmbeddedPostgres


@pytest.fixture
def fresh_dsn(postgres: EmbeddedPostgres) -> str:
    return postgres.create_database(f"fresh_{uuid.uuid4().hex[:10]}")


async def test_concurrent_starts_apply_each_migration_once(fresh_dsn: str) -> None:
    results = await asyncio.gather(*(migrate(fresh_dsn, 384) for _ in range(4)))
    applied = [name for result in results for name in result]
    assert sorted(applied) == sorted(m.name for m in load_migrations())
    conn = await asyncpg.connect(fresh_dsn)
    try:
        rows = await conn.fetch("SELECT version FROM schema_migrations ORDER BY version")
        extensions = {r["extname"] for r in await conn.fetch("SELECT extname FROM pg_extension")}
    finally:
        await conn.close()
    assert [r["version"] for r in rows] == [m.version for m in load_migrations()]
    assert {"vector", "pg_trgm"} <= extensions


async def test_a_second_start_applies_nothing(fresh_dsn: str) -> None:
    await migrate(fresh_dsn, 384)
    assert await migrate(fresh_dsn, 384) == []


async def test_a_model_of_another_dimension_is_refused(fresh_dsn: str) -> None:
    await migrate(fresh_dsn, 384)
    with pytest.raises(ConfigurationError, match=r"384-dimensional.*produces 768"):
        await migrate(fresh_dsn, 768)


async def test_a_model_of_another_vector_space_is_refused(fresh_dsn: str) -> None:
    await migrate(fresh_dsn, 384)  # before the space was recorded: the first check records it
    await migrate(fresh_dsn, 384, "sentence-transformers/all-MiniLM-L6-v2")
    await migrate(fresh_dsn, 384, "sentence-transformers/all-MiniLM-L6-v2")
    with pytest.raises(ConfigurationError, match=r"all-MiniLM-L6-v2.*'onnx:bge-small.onnx:384'"):
        await migrate(fresh_dsn, 384, "onnx:bge-small.onnx:384")


@pytest.mark.parametrize(
    ("model", "message"),
    [
        ("minilm", "the database's vectors were made by 'onnx:another.onnx:384'"),
        ("word2vec", "unknown embedding model 'word2vec'"),
    ],
)
async def test_the_server_refuses_a_model_that_does_not_fit_in_one_line(
    fresh_dsn: str, model: str, message: str
) -> None:
    await migrate(fresh_dsn, 384, "onnx:another.onnx:384")
    env = {
        **os.environ,
        "ENGRAM_DATABASE_URL": fresh_dsn,
        "ENGRAM_API_PORT": str(free_port()),
        "ENGRAM_EMBEDDING_MODEL": model,
    }
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "server"],
        env=env,
        cwd=Path(__file__).parents[2],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith(f"engram server: {message}")


async def test_the_vector_column_follows_the_configured_model(fresh_dsn: str) -> None:
    await migrate(fresh_dsn, 16)
    conn = await asyncpg.connect(fresh_dsn)
    try:
        typmod = await conn.fetchval(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute"
            " WHERE attrelid = 'memory_units'::regclass AND attname = 'embedding'"
        )
    finally:
        await conn.close()
    assert typmod == "halfvec(16)"


async def test_a_fact_keeps_its_embedding_in_its_row(fresh_dsn: str) -> None:
    """Only the token vectors go to TOAST (migration 0021): reading a fact's embedding for a
    distance costs no TOAST lookup."""
    await migrate(fresh_dsn, 384)
    pool = await create_pool(fresh_dsn, max_size=1)
    try:
        async with pool.acquire() as conn:
            await ensure_bank(conn, "inline")
            await conn.execute(
                "INSERT INTO memory_units (id, bank_id, fact_type, text, embedding, token_vectors)"
                " VALUES ($1, 'inline', 'world', $2, $3, $4)",
                uuid.uuid4(),
                os.urandom(300).hex(),  # 600 characters that do not compress
                np.linspace(-1, 1, 384, dtype=np.float32),
                os.urandom(21 * 194),
            )
            toast = await conn.fetchval(
                "SELECT reltoastrelid::regclass::text FROM pg_class"
                " WHERE oid = 'memory_units'::regclass"
            )
            toasted = await conn.fetch(
                f"SELECT sum(octet_length(chunk_data)) AS size FROM {toast} GROUP BY chunk_id"
            )
    finally:
        await pool.close()
    sizes = {r["size"] for r in toasted}
    assert 21 * 194 in sizes  # the token vectors
    assert 4 + 384 * 4 not in sizes  # the embedding (dimension, padding, 384 float4)


async def test_pooled_connections_plan_every_statement_for_its_arguments(fresh_dsn: str) -> None:
    await migrate(fresh_dsn, 384)
    pool = await create_pool(fresh_dsn, max_size=1)
    try:
        async with pool.acquire() as conn:
            assert await conn.fetchval("SHOW plan_cache_mode") == "force_custom_plan"
    finally:
        await pool.close()
    writer = await create_pool(fresh_dsn, max_size=1, custom_plans=False)  # the worker's
    try:
        async with writer.acquire() as conn:
            assert await conn.fetchval("SHOW plan_cache_mode") == "auto"
    finally:
        await writer.close()
