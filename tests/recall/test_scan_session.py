"""Recall's HNSW scans on a pool opened with their settings (engine/recall/semantic.py
SCAN_SESSION, the server's): the mid budget's scan is one statement, the others still set
theirs, and the answers are those of the SET LOCAL path."""

from __future__ import annotations

import asyncpg

from engine.db import Pool, create_pool
from engine.embedding import Embedder
from engine.recall.config import RecallConfig
from engine.recall.query import embed_query
from engine.recall.semantic import SCAN_SESSION, SESSION_EF_SEARCH, semantic_arm
from engine.recall.types import RecallRequest
from engram.postgres import EmbeddedPostgres
from recall.recall_support import Banks


async def test_the_mid_budgets_scan_sends_its_statement_alone(
    recall_pool: Pool, postgres: EmbeddedPostgres, embedder: Embedder, banks: Banks
) -> None:
    logged: list[str] = []

    async def log(conn: asyncpg.Connection) -> None:
        conn.add_query_logger(lambda record: logged.append(record.query))

    # The corpus's database, on connections opened as the server opens its own.
    session = await create_pool(
        postgres.create_database("t_recall_corpus"),
        max_size=2,
        on_connect=log,
        settings=SCAN_SESSION,
    )
    config = RecallConfig()
    request = RecallRequest(banks.main, "Where does Ivo work?")
    vector = embed_query(embedder, request.query).vector
    try:
        for budget in ("low", "mid", "high"):
            profile = config.budget(budget)
            limit, ef, floor = profile.arm_limit, profile.ef_search, config.similarity_floor
            async with recall_pool.acquire() as conn:
                local = await semantic_arm(
                    conn, request, vector, limit=limit, ef_search=ef, floor=floor
                )
            logged.clear()
            async with session.acquire() as conn:
                held = await semantic_arm(
                    conn, request, vector, limit=limit, ef_search=ef, floor=floor, session=True
                )
                settings = await conn.fetchrow(
                    "SELECT current_setting('hnsw.ef_search') AS ef,"
                    " current_setting('hnsw.iterative_scan') AS scan"
                )
            assert [(h.unit_id, h.score) for h in held.hits] == [
                (h.unit_id, h.score) for h in local.hits
            ]
            assert held.hits
            # A SET LOCAL lasts for its transaction: the connection keeps the session's.
            assert settings is not None and settings["scan"] == "relaxed_order"
            assert settings["ef"] == str(SESSION_EF_SEARCH)
            scans = logged[:-1]  # the last is the settings' check above
            if max(profile.ef_search, profile.arm_limit) == SESSION_EF_SEARCH:
                assert len(scans) == 1 and "hnsw" not in scans[0], budget
            else:
                assert any("set_config('hnsw.ef_search'" in q for q in scans), budget
    finally:
        await session.close()
