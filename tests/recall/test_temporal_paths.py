"""The temporal arm's three paths give one answer: the exact window and the spread over the
bank held in memory (no statement), the exact statement through SQL, and HNSW for a long
window holding many facts; a long window holding few is ranked exactly on either path."""

from __future__ import annotations

import asyncio
import math
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import TypedDict

import asyncpg
import pytest
from asyncpg.connection import LoggedQuery
from pgvector import Vector

from engine.db import Connection, Pool, create_pool
from engine.embedding import Embedder
from engine.recall.config import RecallConfig
from engine.recall.filters import filter_args, visible_states
from engine.recall.graph_cache import graph_cache_for
from engine.recall.query import embed_query
from engine.recall.temporal import (
    EXACT_FACTS,
    EXACT_WINDOW,
    WINDOW_COUNT_SQL,
    exact_window_sql,
    pooled_temporal_arm,
    temporal_arm,
    window_sql,
)
from engine.recall.types import FACT_TYPES, ArmResult, FloatVector, RecallRequest, TimeWindow
from engram.postgres import EmbeddedPostgres
from recall.recall_support import QUERIES, Banks


class _Knobs(TypedDict):
    limit: int
    ef_search: int
    spread_seeds: int
    fanout: int


async def test_the_cached_temporal_arm_finds_the_sql_arms_facts(
    recall_pool: Pool,
    postgres: EmbeddedPostgres,
    embedder: Embedder,
    cpu: ThreadPoolExecutor,
    banks: Banks,
) -> None:
    cache = graph_cache_for(RecallConfig(), recall_pool, cpu, 64 * 2**20)
    # The exact window and the spread must not need the pool.
    closed = await _closed_pool(postgres, "t_graph_cache_closed")
    compared = spread = 0
    for bank in (banks.window, banks.main, banks.by_message, banks.depth):
        graph = await cache.read(bank)
        assert graph is not None
        async with recall_pool.acquire() as conn:
            moments = [
                r["at"]
                for r in await conn.fetch(
                    "SELECT DISTINCT coalesce(occurred_start, mentioned_at) AS at"
                    " FROM memory_units WHERE bank_id = $1 AND mentioned_at IS NOT NULL"
                    " ORDER BY 1 LIMIT 3",
                    bank,
                )
            ]
        assert moments
        for query in QUERIES[:2]:
            vector = embed_query(embedder, query).vector
            for moment in moments:
                for request in (
                    RecallRequest(bank, query),
                    RecallRequest(bank, query, types=("world",)),
                    RecallRequest(bank, query, tags=("x",), tags_match="any_strict"),
                    RecallRequest(bank, query, include_superseded=True, include_archived=True),
                ):
                    for window, pool, exact_facts in (
                        # exact: by date in memory, nothing sent
                        (
                            TimeWindow(moment - timedelta(days=3), moment + timedelta(days=4)),
                            closed,
                            EXACT_FACTS,
                        ),
                        # longer than EXACT_WINDOW and holding more than `exact_facts`: HNSW
                        # in SQL, the spread in memory
                        (
                            TimeWindow(moment - timedelta(days=90), moment + timedelta(days=90)),
                            recall_pool,
                            0,
                        ),
                    ):
                        knobs = _Knobs(limit=10, ef_search=40, spread_seeds=5, fanout=12)
                        async with recall_pool.acquire() as conn:
                            sql = await temporal_arm(
                                conn,
                                request,
                                vector,
                                window,
                                spread_decay=0.5,
                                exact_facts=exact_facts,
                                **knobs,
                            )
                        mem = await pooled_temporal_arm(
                            pool,
                            (graph, cpu),
                            request,
                            vector,
                            window,
                            spread_decay=0.5,
                            exact_facts=exact_facts,
                            **knobs,
                        )
                        assert [h.unit_id for h in mem.hits] == [h.unit_id for h in sql.hits], (
                            bank,
                            query,
                            window,
                            request,
                        )
                        for a, b in zip(mem.hits, sql.hits, strict=True):
                            assert math.isclose(a.score, b.score, abs_tol=1e-6)
                        compared += len(sql.hits)
                        if pool is closed and not request.types and not request.tags:
                            async with recall_pool.acquire() as conn:
                                alone = await temporal_arm(
                                    conn, request, vector, window, spread_decay=0.0, **knobs
                                )
                            spread += len({h.unit_id for h in sql.hits} - set(_ids(alone)))
    assert compared > 100 and spread > 0  # windows held facts, and some came by the spread
    await cache.close()


async def test_a_long_window_holding_few_facts_is_ranked_exactly_in_memory(
    recall_pool: Pool,
    postgres: EmbeddedPostgres,
    embedder: Embedder,
    cpu: ThreadPoolExecutor,
    banks: Banks,
) -> None:
    """A season or a year the bank has few facts in is where HNSW behind a date filter is
    slowest and misses most: the held bank counts the window's facts first, and when they
    are at most EXACT_FACTS ranks them all, sending nothing; the answer is the exact
    statement's."""
    cache = graph_cache_for(RecallConfig(), recall_pool, cpu, 64 * 2**20)
    closed = await _closed_pool(postgres, "t_graph_cache_closed2")
    knobs = _Knobs(limit=10, ef_search=40, spread_seeds=5, fanout=12)
    compared = 0
    for bank in (banks.window, banks.main, banks.depth):
        graph = await cache.read(bank)
        assert graph is not None and len(graph.facts.ids) < EXACT_FACTS
        async with recall_pool.acquire() as conn:
            first = await conn.fetchval(
                "SELECT min(coalesce(occurred_start, mentioned_at)) FROM memory_units"
                " WHERE bank_id = $1",
                bank,
            )
        # a year around the bank's first day: longer than EXACT_WINDOW, and part empty
        window = TimeWindow(first - timedelta(days=300), first + timedelta(days=65))
        assert window.end - window.start > EXACT_WINDOW
        for query in QUERIES:
            request = RecallRequest(bank, query)
            vector = embed_query(embedder, query).vector
            mem = await pooled_temporal_arm(
                closed, (graph, cpu), request, vector, window, spread_decay=0.0, **knobs
            )
            async with recall_pool.acquire() as conn:
                exact = await _exact_window(conn, request, vector, window, knobs["limit"])
            assert [h.unit_id for h in mem.hits] == [r["id"] for r in exact], (bank, query)
            for hit, row in zip(mem.hits, exact, strict=True):
                assert math.isclose(hit.score, row["similarity"], abs_tol=1e-6)
            compared += len(exact)
            # over the bound, the window goes to the HNSW statement: the closed pool fails
            with pytest.raises(asyncpg.InterfaceError):
                await pooled_temporal_arm(
                    closed,
                    (graph, cpu),
                    request,
                    vector,
                    window,
                    spread_decay=0.0,
                    exact_facts=0,
                    **knobs,
                )
    assert compared > 20
    await cache.close()


async def test_a_long_window_holding_few_facts_is_ranked_exactly_through_sql(
    recall_pool: Pool, embedder: Embedder, banks: Banks
) -> None:
    """The same through SQL (a bank not held, or changed since it was read): the window's
    units are counted first, up to one more than EXACT_SQL_FACTS, and when there are no more
    the exact statement ranks them; no HNSW statement is sent."""
    knobs = _Knobs(limit=10, ef_search=40, spread_seeds=5, fanout=12)
    compared = 0
    sent: list[str] = []

    def log(record: LoggedQuery) -> None:
        sent.append(record.query)

    for bank in (banks.window, banks.main, banks.depth):
        async with recall_pool.acquire() as conn:
            row = await conn.fetchrow(
                "SELECT min(coalesce(occurred_start, mentioned_at)), count(*) FROM memory_units"
                " WHERE bank_id = $1",
                bank,
            )
            assert row is not None
            first, units = row
            window = TimeWindow(first - timedelta(days=300), first + timedelta(days=65))
            assert window.end - window.start > EXACT_WINDOW
            # The count: every unit the window holds, whatever its state or type (an upper
            # bound of what a recall may see), capped at its last argument.
            request = RecallRequest(
                bank, "", types=FACT_TYPES, include_superseded=True, include_archived=True
            )
            inside = await conn.fetch(
                exact_window_sql(request.tags_match, visible_states(request)),
                *filter_args(request),
                Vector(embed_query(embedder, "anything").vector),
                window.start,
                window.end,
                units,
            )
            count = WINDOW_COUNT_SQL
            assert await conn.fetchval(count, bank, window.start, window.end, units) == len(inside)
            assert len(inside) > 1
            assert await conn.fetchval(count, bank, window.start, window.end, 1) == 1
            conn.add_query_logger(log)
            for query in QUERIES:
                request = RecallRequest(bank, query)
                vector = embed_query(embedder, query).vector
                await asyncio.sleep(0)  # earlier statements logged before the clear
                sent.clear()
                sql = await temporal_arm(conn, request, vector, window, spread_decay=0.0, **knobs)
                await asyncio.sleep(0)  # asyncpg calls a query logger soon after the query
                assert sent == [count, exact_window_sql(request.tags_match)], (bank, query)
                exact = await _exact_window(conn, request, vector, window, knobs["limit"])
                assert _ids(sql) == [r["id"] for r in exact], (bank, query)
                compared += len(exact)
                # over the bound (here: fewer units than the window holds), HNSW
                await asyncio.sleep(0)  # earlier statements logged before the clear
                sent.clear()
                await temporal_arm(
                    conn,
                    request,
                    vector,
                    window,
                    spread_decay=0.0,
                    exact_facts=len(inside) - 1,
                    **knobs,
                )
                await asyncio.sleep(0)
                assert window_sql(request.tags_match) in sent
                assert exact_window_sql(request.tags_match) not in sent
            conn.remove_query_logger(log)
    assert compared > 20


async def _exact_window(
    conn: Connection,
    request: RecallRequest,
    vector: FloatVector,
    window: TimeWindow,
    limit: int,
) -> list[asyncpg.Record]:
    """The exact statement's rows for the window, the answer both exact paths must give."""
    return await conn.fetch(
        exact_window_sql(request.tags_match),
        *filter_args(request),
        Vector(vector),
        window.start,
        window.end,
        limit,
    )


async def _closed_pool(postgres: EmbeddedPostgres, name: str) -> Pool:
    """A pool that can send nothing: using it raises asyncpg.InterfaceError."""
    pool = await create_pool(postgres.create_database(name), min_size=0)
    await pool.close()
    return pool


def _ids(arm: ArmResult) -> list[str]:
    return [h.unit_id for h in arm.hits]
