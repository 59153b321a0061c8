"""The temporal arm's windows on a bank held in memory, on the bank `bench.recall_latency`
built: for each time window the bench's queries name, how many facts it holds, the thread
CPU of ranking them all exactly in memory (`engine/recall/temporal_memory.py`
`window_hits`), and, for a window longer than EXACT_WINDOW, the client time of the HNSW
statement such a window was sent to before (`engine/recall/temporal.py` `window_sql`, with
the server's scan settings) and how many of its hits are among the exact ones; then what a
bank searched through SQL sends for such a window: the capped count (`WINDOW_COUNT_SQL`)
and the exact statement (`exact_window_sql`), client time each. Prints one line per window
length and size, and the path each takes now in memory (EXACT_FACTS) and through SQL
(EXACT_SQL_FACTS).

    .venv/bin/python -m bench.temporal_windows --data-dir DIR
"""

from __future__ import annotations

import os

for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import argparse  # noqa: E402
import asyncio  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections import defaultdict  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from concurrent.futures import ThreadPoolExecutor  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from datetime import UTC  # noqa: E402

from pgvector import Vector  # noqa: E402

from bench.in_process import bench_database  # noqa: E402
from bench.recall_latency import BANK, DAYS, DEFAULT_DATA_DIR, SEED, START  # noqa: E402
from bench.synthetic_facts import generate_facts, generate_queries  # noqa: E402
from engine.db import create_pool  # noqa: E402
from engine.embedding import load_embedder  # noqa: E402
from engine.recall.config import RecallConfig  # noqa: E402
from engine.recall.filters import filter_args  # noqa: E402
from engine.recall.graph_cache import graph_cache_for  # noqa: E402
from engine.recall.query import analyse_text, embed_query  # noqa: E402
from engine.recall.semantic import SCAN_SESSION  # noqa: E402
from engine.recall.temporal import (  # noqa: E402
    EXACT_FACTS,
    EXACT_SQL_FACTS,
    EXACT_WINDOW,
    WINDOW_COUNT_SQL,
    clamp_window,
    exact_window_sql,
    window_sql,
)
from engine.recall.temporal_memory import in_window, window_hits  # noqa: E402
from engine.recall.types import RecallRequest  # noqa: E402

LIMIT = 60  # the mid budget's arm limit


@dataclass(frozen=True)
class Window:
    days: int
    facts: int
    memory_ms: float
    hnsw_ms: float | None  # a window up to EXACT_WINDOW is never sent to HNSW
    shared: int | None  # of the HNSW statement's hits, how many the exact ranking has
    count_ms: float | None  # the capped count a bank searched through SQL sends first
    sql_exact_ms: float | None  # the exact statement through SQL


async def measure(database_url: str, queries: int) -> list[Window]:
    _, vocab = generate_facts(100_000, seed=SEED, start=START, days=DAYS)
    asked = generate_queries(queries, vocab, seed=SEED + 1, start=START, days=DAYS)
    embedder = load_embedder("minilm")
    pool = await create_pool(database_url, max_size=2, settings=SCAN_SESSION)
    cpu = ThreadPoolExecutor(1)
    cache = graph_cache_for(RecallConfig(), pool, cpu, 2**31)
    windows: list[Window] = []
    try:
        graph = await cache.read(BANK)
        if graph is None:
            raise SystemExit(f"no bank {BANK} here: run bench.recall_latency first")
        async with pool.acquire() as conn:
            for query in asked:
                window = analyse_text(query.text, query.reference.astimezone(UTC)).window
                if window is None:
                    continue
                window = clamp_window(window)
                request = RecallRequest(bank_id=BANK, query=query.text)
                vector = embed_query(embedder, query.text).vector
                started = time.thread_time()
                exact = window_hits(graph, request, vector, window, LIMIT) or []
                memory_ms = (time.thread_time() - started) * 1000
                hnsw_ms = shared = count_ms = sql_exact_ms = None
                if window.end - window.start > EXACT_WINDOW:
                    args = (*filter_args(request), Vector(vector), window.start, window.end)
                    began = time.perf_counter()
                    rows = await conn.fetch(window_sql(request.tags_match), *args, LIMIT)
                    hnsw_ms = (time.perf_counter() - began) * 1000
                    shared = len({r["id"] for r in rows} & {h.unit_id for h in exact})
                    began = time.perf_counter()
                    await conn.fetchval(
                        WINDOW_COUNT_SQL, BANK, window.start, window.end, EXACT_SQL_FACTS + 1
                    )
                    count_ms = (time.perf_counter() - began) * 1000
                    began = time.perf_counter()
                    await conn.fetch(exact_window_sql(request.tags_match), *args, LIMIT)
                    sql_exact_ms = (time.perf_counter() - began) * 1000
                days = (window.end - window.start).days
                facts = len(in_window(graph.dates, window))
                windows.append(
                    Window(days, facts, memory_ms, hnsw_ms, shared, count_ms, sql_exact_ms)
                )
    finally:
        await cache.close()
        cpu.shutdown()
        await pool.close()
    return windows


def report(windows: Sequence[Window]) -> None:
    """One line per window length and size (in-window facts rounded to 2 digits)."""
    groups: dict[tuple[int, int], list[Window]] = defaultdict(list)
    for w in windows:
        size = int(float(f"{w.facts:.2g}")) if w.facts else 0
        groups[(w.days, size)].append(w)
    print(f"{len(windows)} windows; exact in memory up to {EXACT_WINDOW.days} days, or up to")
    print(f"{EXACT_FACTS:,} facts in the window; through SQL up to {EXACT_SQL_FACTS:,}")
    print("ms: median and max of each group; shared: of HNSW's hits, how many are exact ones")
    print(
        " days   ~facts  n |  memory ms     |   HNSW ms       shared |  count ms  SQL exact ms"
        "   | memory  SQL"
    )
    for (days, size), group in sorted(groups.items()):
        shared = [w.shared for w in group if w.shared is not None]
        long = days > EXACT_WINDOW.days
        most = max(w.facts for w in group)
        memory_path = "HNSW" if long and most > EXACT_FACTS else "exact"
        sql_path = "HNSW" if long and most > EXACT_SQL_FACTS else "exact"
        hits = f"{min(shared):>2}-{max(shared):<3}" if shared else f"{'-':>6}"
        print(
            f"{days:5d} {size:8,d} {len(group):2d} | {_spread([w.memory_ms for w in group], 2)} | "
            f"{_spread([w.hnsw_ms for w in group])}  {hits} | "
            f"{_spread([w.count_ms for w in group])} {_spread([w.sql_exact_ms for w in group])}"
            f" | {memory_path:>6} {sql_path:>5}"
        )


def _spread(values: Sequence[float | None], digits: int = 1) -> str:
    """ "median max" of the values measured, dashes when none was."""
    got = [v for v in values if v is not None]
    if not got:
        return f"{'-':>6} {'-':>6}"
    return f"{statistics.median(got):6.{digits}f} {max(got):6.{digits}f}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default=DEFAULT_DATA_DIR)
    parser.add_argument("--database-url", default="")
    parser.add_argument("--queries", type=int, default=300, help="the bench's first queries")
    args = parser.parse_args(argv)
    with bench_database(args.database_url, args.data_dir, "recall_latency") as database_url:
        report(asyncio.run(measure(database_url, args.queries)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
