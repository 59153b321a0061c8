"""Temporal arm: facts dated inside the query's time window, then their temporal neighbours.

A fact is in the window [start, end) when its occurred range overlaps it, or, failing an
occurred date, when it was mentioned inside it. In-window facts are ranked by cosine
similarity to the query (the window says *when*, the text says *what*); the best few then
pass a decayed share of their score to facts they are temporally linked to, which catches
the other half of an event told across two turns.
The window comes from `engine.dates.parse_query_window` (run in the thread pool) or from the
request's `temporal_window`; without one the arm does not run.
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import Executor
from datetime import timedelta
from typing import Final

from pgvector import Vector

from engine.db import Connection, Pool
from engine.limits import EARLIEST_INSTANT, LATEST_INSTANT
from engine.recall.filters import ACTIVE, filter_args, filter_sql, visible_states
from engine.recall.graph_memory import BankGraph
from engine.recall.semantic import scan_settings
from engine.recall.temporal_memory import spread_hits, window_hits
from engine.recall.types import ArmHit, ArmResult, FloatVector, RecallRequest, TimeWindow
from engine.store.memories import TagsMatch


def window_sql(tags_match: TagsMatch, states: tuple[str, ...] = ACTIVE) -> str:
    """$4 query vector, $5 window start, $6 window end (exclusive), $7 limit."""
    return f"""
WITH hits AS MATERIALIZED (
    SELECT m.id, m.embedding <=> $4 AS distance
    FROM memory_units m
    WHERE {filter_sql("m", tags_match, states)}
      AND ((m.occurred_start IS NOT NULL AND m.occurred_start < $6
            AND coalesce(m.occurred_end, m.occurred_start) >= $5)
           OR (m.occurred_start IS NULL AND m.mentioned_at >= $5 AND m.mentioned_at < $6))
    ORDER BY m.embedding <=> $4
    LIMIT $7
)
SELECT id::text AS id, 1 - distance AS similarity FROM hits ORDER BY distance, id
"""


# Windows up to this long are searched exactly: every in-window fact is read through the date
# indexes and ranked by cosine, with no HNSW scan. Measured at ~55k synthetic facts over
# 4 years (bench/recall_latency.py, 14 questions, loaded machine), HNSW iterative scan vs exact:
#   1-7 days ("yesterday", "two weeks ago"): 166-247 ms, and 42-51 of the 60 in-window facts
#     found, vs 2-11 ms and all 60 (the HNSW walk starves behind a filter few facts pass);
#   ~30 days: 7-125 ms vs 2-71 ms (exact faster in 5 of 7); 92 days: 19-63 ms vs 178-224 ms;
#   365 days: 18 ms vs 907 ms. Hence 45 days: months exact, seasons and years through HNSW.
EXACT_WINDOW = timedelta(days=45)
# A bank held in memory knows how many facts a window holds before ranking any, so a longer
# window is searched exactly too when it holds at most this many: ranking them costs ~1 µs a
# fact, and HNSW behind a filter few facts pass is slowest exactly then. Measured at 100k
# synthetic facts over 4 years (bench/temporal_windows.py, docs/benchmarks.md "The temporal
# arm's long windows"), medians of exact in memory (thread CPU) vs the HNSW statement (client
# wall): a quarter or a year with 0-78 facts (before the bank's first day or after its last)
# 0.43-0.65 ms vs 50 ms; a quarter, ~6,400 facts, 7.1 ms vs 20.4 ms (and HNSW missed 0-8 of
# the 60); a year, ~25,000 facts, 31.5-34.2 ms vs 7.0-7.4 ms.
EXACT_FACTS: Final = 8000
# A bank searched through SQL (not held in memory, or changed since it was read) counts a
# longer window's facts first, up to one more than this, and ranks them exactly when there
# are no more: the statement reads each fact's embedding, ~4 µs a fact, where HNSW behind a
# filter few facts pass walks the whole graph (~50 ms at 100k facts). Measured at 100k
# (bench/temporal_windows.py, docs/benchmarks.md "Long windows through SQL"), medians: a
# quarter or a year holding 0-78 facts, count 0.6-0.7 ms + exact 1.0-1.7 ms vs HNSW 44-50 ms;
# a quarter, ~6,400 facts, exact 29.6 ms vs HNSW 20.4 ms; the count costs ~0.9 ms however
# many facts the window holds.
EXACT_SQL_FACTS: Final = 2000
# Facts lasting longer than this are indexed by their end (migrations 0025 and 0044; the same
# literal).
LONG_LASTING: Final = "interval '744 hours'"


def exact_window_sql(tags_match: TagsMatch, states: tuple[str, ...] = ACTIVE) -> str:
    """The same rows as `window_sql`, found by date: the four branches are disjoint (started
    inside the window; started at most LONG_LASTING before it and still going; started earlier
    and still going, which takes lasting longer than LONG_LASTING: the partial index of
    migration 0025; undated, mentioned inside it). Every branch is an index range of
    unit_times (migration 0044: the units' times are indexed there, not on memory_units), so
    no misestimate turns one into a sequential scan."""
    units = "unit_times t JOIN memory_units m ON m.id = t.unit_id"
    where = "t.bank_id = $1 AND " + filter_sql("m", tags_match, states)
    return f"""
WITH inside AS MATERIALIZED (
    SELECT m.id, m.embedding FROM {units}
    WHERE {where} AND t.occurred_start >= $5 AND t.occurred_start < $6
      AND coalesce(t.occurred_end, t.occurred_start) >= $5
    UNION ALL
    SELECT m.id, m.embedding FROM {units}
    WHERE {where} AND t.occurred_start >= $5::timestamptz - {LONG_LASTING} AND t.occurred_start < $5
      AND t.occurred_end >= $5
    UNION ALL
    SELECT m.id, m.embedding FROM {units}
    WHERE {where} AND t.occurred_end - t.occurred_start > {LONG_LASTING}
      AND t.occurred_start < $5::timestamptz - {LONG_LASTING} AND t.occurred_end >= $5
    UNION ALL
    SELECT m.id, m.embedding FROM {units}
    WHERE {where} AND t.occurred_start IS NULL AND t.mentioned_at >= $5 AND t.mentioned_at < $6
), hits AS MATERIALIZED (
    SELECT id, embedding <=> $4 AS distance FROM inside ORDER BY distance, id LIMIT $7
)
SELECT id::text AS id, 1 - distance AS similarity FROM hits ORDER BY distance, id
"""


# How many of bank $1's units a window [$2, $3) holds, counted up to $4: the four branches of
# `exact_window_sql` over unit_times alone, index-only, an upper bound of the facts a recall
# may see there (states and tags are not read).
WINDOW_COUNT_SQL: Final = f"""
SELECT count(*) FROM (
    SELECT 1 FROM unit_times t
    WHERE t.bank_id = $1 AND t.occurred_start >= $2 AND t.occurred_start < $3
      AND coalesce(t.occurred_end, t.occurred_start) >= $2
    UNION ALL
    SELECT 1 FROM unit_times t
    WHERE t.bank_id = $1 AND t.occurred_start >= $2::timestamptz - {LONG_LASTING}
      AND t.occurred_start < $2 AND t.occurred_end >= $2
    UNION ALL
    SELECT 1 FROM unit_times t
    WHERE t.bank_id = $1 AND t.occurred_end - t.occurred_start > {LONG_LASTING}
      AND t.occurred_start < $2::timestamptz - {LONG_LASTING} AND t.occurred_end >= $2
    UNION ALL
    SELECT 1 FROM unit_times t
    WHERE t.bank_id = $1 AND t.occurred_start IS NULL AND t.mentioned_at >= $2
      AND t.mentioned_at < $3
    LIMIT $4
) x
"""


def spread_sql(tags_match: TagsMatch, states: tuple[str, ...] = ACTIVE) -> str:
    """Temporal-link neighbours of $4 (seeds) with $5 (their scores); $6 links per seed."""
    return f"""
WITH seeds AS (SELECT * FROM unnest($4::uuid[], $5::float8[]) AS s(id, score))
SELECT m.id::text AS id, max(s.score * l.weight) AS score
FROM seeds s
CROSS JOIN LATERAL (
    SELECT other, weight FROM (
        SELECT to_unit AS other, weight FROM memory_links
        WHERE from_unit = s.id AND link_type = 'temporal'
        UNION ALL
        SELECT from_unit, weight FROM memory_links
        WHERE to_unit = s.id AND link_type = 'temporal'
    ) x ORDER BY weight DESC, other LIMIT $6
) l
JOIN memory_units m ON m.id = l.other
WHERE {filter_sql("m", tags_match, states)}
GROUP BY m.id
"""


def clamp_window(window: TimeWindow) -> TimeWindow:
    """The window within the instants engine/limits.py admits. The edge rejects dates
    outside them and the date rules drop such ranges; this keeps the SQL and the
    arithmetic here safe from any other caller."""
    start = min(max(window.start, EARLIEST_INSTANT), LATEST_INSTANT)
    end = min(max(window.end, EARLIEST_INSTANT), LATEST_INSTANT)
    return TimeWindow(start, max(start, end))


async def temporal_arm(
    conn: Connection,
    request: RecallRequest,
    vector: FloatVector,
    window: TimeWindow | None,
    *,
    limit: int,
    ef_search: int,
    spread_seeds: int,
    spread_decay: float,
    fanout: int,
    session: bool = False,
    exact_facts: int = EXACT_SQL_FACTS,
) -> ArmResult:
    """`session`: the connection started with semantic.SCAN_SESSION. A window longer than
    EXACT_WINDOW is searched exactly when it holds at most `exact_facts` facts, else
    through HNSW."""
    started = time.perf_counter()
    if window is None:
        return ArmResult("temporal", [], 0.0, "no time window in the query")
    window = clamp_window(window)
    hits = await _window_hits(conn, request, vector, window, limit, ef_search, session, exact_facts)
    seeds = hits[:spread_seeds]
    if seeds and spread_decay > 0:
        spread = await conn.fetch(
            spread_sql(request.tags_match, visible_states(request)),
            *filter_args(request),
            [h.unit_id for h in seeds],
            [h.score * spread_decay for h in seeds],
            fanout,
        )
        hits = _with_spread(hits, [ArmHit(r["id"], float(r["score"])) for r in spread], limit)
    return _result(hits, window, started)


async def pooled_temporal_arm(
    pool: Pool,
    cached: tuple[BankGraph, Executor] | None,
    request: RecallRequest,
    vector: FloatVector,
    window: TimeWindow | None,
    *,
    limit: int,
    ef_search: int,
    spread_seeds: int,
    spread_decay: float,
    fanout: int,
    session: bool = False,
    exact_facts: int = EXACT_FACTS,
) -> ArmResult:
    """`temporal_arm` on a pooled connection, or over the bank held in memory when `cached`
    (engine/recall/temporal_memory.py): then the exact window and the spread send no
    statement. A window longer than EXACT_WINDOW is searched exactly in memory too when it
    holds at most `exact_facts` facts, else through HNSW (the same approximate answer as
    without the cache)."""
    if cached is None:
        async with pool.acquire() as conn:
            return await temporal_arm(
                conn,
                request,
                vector,
                window,
                limit=limit,
                ef_search=ef_search,
                spread_seeds=spread_seeds,
                spread_decay=spread_decay,
                fanout=fanout,
                session=session,
            )
    started = time.perf_counter()
    if window is None:
        return ArmResult("temporal", [], 0.0, "no time window in the query")
    window = clamp_window(window)
    graph, cpu = cached
    loop = asyncio.get_running_loop()
    most = None if window.end - window.start <= EXACT_WINDOW else exact_facts
    found = await loop.run_in_executor(
        cpu, window_hits, graph, request, vector, window, limit, most
    )
    if found is not None:
        hits = found
    else:
        async with pool.acquire() as conn:  # a long window with too many facts: HNSW
            hits = await _window_hits(conn, request, vector, window, limit, ef_search, session, 0)
    seeds = [(h.unit_id, h.score * spread_decay) for h in hits[:spread_seeds]]
    if seeds and spread_decay > 0:
        spread = await loop.run_in_executor(cpu, spread_hits, graph, request, vector, seeds, fanout)
        hits = _with_spread(hits, spread, limit)
    return _result(hits, window, started)


async def _window_hits(
    conn: Connection,
    request: RecallRequest,
    vector: FloatVector,
    window: TimeWindow,
    limit: int,
    ef_search: int,
    session: bool,
    exact_facts: int,
) -> list[ArmHit]:
    """A long window holding at most `exact_facts` facts (counted first unless it is 0) is
    searched exactly too."""
    args = (*filter_args(request), Vector(vector), window.start, window.end, limit)
    if window.end - window.start <= EXACT_WINDOW or (
        exact_facts > 0
        and await conn.fetchval(
            WINDOW_COUNT_SQL, request.bank_id, window.start, window.end, exact_facts + 1
        )
        <= exact_facts
    ):
        rows = await conn.fetch(
            exact_window_sql(request.tags_match, visible_states(request)), *args
        )
    else:
        async with scan_settings(conn, max(ef_search, limit), session):
            rows = await conn.fetch(window_sql(request.tags_match, visible_states(request)), *args)
    return [ArmHit(r["id"], float(r["similarity"])) for r in rows]


def _with_spread(hits: list[ArmHit], spread: list[ArmHit], limit: int) -> list[ArmHit]:
    found = {h.unit_id for h in hits}
    extra = [h for h in spread if h.unit_id not in found]
    return sorted([*hits, *extra], key=lambda h: (-h.score, h.unit_id))[:limit]


def _result(hits: list[ArmHit], window: TimeWindow, started: float) -> ArmResult:
    note = f"window {window.start.isoformat()} to {window.end.isoformat()}"
    return ArmResult("temporal", hits, (time.perf_counter() - started) * 1000, note)
