"""Migration 0014: a database whose facts carry int8 token vectors (the format before it) is
converted to int4 in place, and keeps answering recalls with the converted vectors."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from numpy.typing import NDArray
from support.old_schema import migrate_before
from temporalio.testing import WorkflowEnvironment

from engine.db import create_pool, migrate
from engine.embedding import Embedder
from engine.recall.vectors import decode_token_vectors, row_bytes
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
VALUES ($1, $2, 'world', $3, $4, $5, 8)
"""


def int8_blob(tokens: NDArray[np.float32]) -> bytes:
    """Token vectors as stored before migration 0014: int8 rows, then float16 row scales."""
    scales = np.maximum(np.abs(tokens).max(axis=1), 1e-12) / 127.0
    codes = np.clip(np.rint(tokens / scales[:, None]), -127, 127).astype(np.int8)
    blob: bytes = codes.tobytes() + scales.astype(np.float16).tobytes()
    return blob


async def test_int8_token_vectors_are_converted_and_the_bank_keeps_answering(
    tmp_path: Path,
    postgres: EmbeddedPostgres,
    temporal_env: WorkflowEnvironment,
    embedder: Embedder,
    cpu: ThreadPoolExecutor,
) -> None:
    dsn = postgres.create_database(f"t_int8_{uuid.uuid4().hex[:10]}")
    await migrate_before(dsn, embedder.dimension, 14)
    pooled, tokens = embedder.embed_with_tokens(list(OLD_FORMAT_FACTS))
    ids = [str(uuid.uuid4()) for _ in OLD_FORMAT_FACTS]
    bank = "before-0014"
    pool = await create_pool(dsn, max_size=4)
    try:
        async with pool.acquire() as conn:
            await ensure_bank(conn, bank)
            for fact_id, text, vector, matrix in zip(
                ids, OLD_FORMAT_FACTS, pooled, tokens, strict=True
            ):
                await conn.execute(_INSERT, fact_id, bank, text, vector, int8_blob(matrix))
        applied = await migrate(dsn, embedder.dimension, embedder.space)
        assert "0014_int4_token_vectors.sql" in applied
        async with pool.acquire() as conn:
            stored = {
                str(r["id"]): r["token_vectors"]
                for r in await conn.fetch("SELECT id, token_vectors FROM memory_units")
            }
        for fact_id, matrix in zip(ids, tokens, strict=True):
            blob = stored[fact_id]
            assert len(blob) == matrix.shape[0] * row_bytes(embedder.dimension)
            # Migration 0026 then kept the second half of the dimensions.
            decoded = decode_token_vectors(blob, embedder.dimension)
            kept = matrix[:, -decoded.shape[1] :]
            norms = np.linalg.norm(decoded, axis=1) * np.linalg.norm(kept, axis=1)
            cosines = (decoded * kept).sum(axis=1) / norms
            assert cosines.min() > 0.97, cosines

        application = recall_app(tmp_path, pool, temporal_env, embedder, cpu)
        body = await traced_recall(application, bank, OLD_FORMAT_QUERY)
        assert body["results"][0]["id"] == ids[0]
        assert body["trace"]["rerank"]["reranker"] == "maxsim"
    finally:
        await pool.close()
