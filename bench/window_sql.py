"""Recall's exact time window through SQL (`engine/recall/temporal.py` `exact_window_sql`,
the statement a bank not held in memory sends for a window up to EXACT_WINDOW), timed on a
database a `bench.entity_skew --home DIR` run kept: `--windows` windows of `--days` days
spread evenly over the bank's mentions, each with a random query vector, 60 hits each;
prints the median and p90 and the plan of the last one.

    .venv/bin/python -m bench.window_sql --home DIR
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import TextIO

import asyncpg
import numpy as np
from pgvector.asyncpg import register_vector

from bench.entity_skew import BANK
from engine.recall.temporal import exact_window_sql
from engine.recall.types import FACT_TYPES
from engram.postgres import EmbeddedPostgres

HITS = 60
_SPAN = "SELECT min(mentioned_at), max(mentioned_at) FROM memory_units WHERE bank_id = $1"


async def time_windows(dsn: str, windows: int, days: int, out: TextIO) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await register_vector(conn)
        span = await conn.fetchrow(_SPAN, BANK)
        assert span is not None
        first, last = span[0], span[1]
        sql = exact_window_sql("any")
        rng = np.random.default_rng(1)
        seconds: list[float] = []
        args: tuple[object, ...] = ()
        for i in range(windows):
            start = first + (last - first) * (i / windows)
            vector = rng.normal(size=384).astype(np.float32)
            vector /= np.linalg.norm(vector)
            args = (BANK, list(FACT_TYPES), [], vector, start, start + timedelta(days=days), HITS)
            began = time.perf_counter()
            await conn.fetch(sql, *args)
            seconds.append(time.perf_counter() - began)
        ms = np.array(seconds) * 1e3
        out.write(
            f"exact window of {days} days, {windows} windows over {first:%Y-%m-%d}"
            f"..{last:%Y-%m-%d}: median {np.median(ms):.2f} ms,"
            f" p90 {np.percentile(ms, 90):.2f} ms\n"
        )
        plan = await conn.fetch("EXPLAIN (ANALYZE, BUFFERS) " + sql, *args)
        out.write("the last window's plan:\n" + "\n".join(r[0] for r in plan) + "\n")
    finally:
        await conn.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", type=Path, required=True, help="a kept bench.entity_skew home")
    parser.add_argument("--windows", type=int, default=40)
    parser.add_argument("--days", type=int, default=14)
    args = parser.parse_args(argv)
    postgres = EmbeddedPostgres(args.home / "postgres", args.home / "postgres.log", ())
    postgres.start()
    try:
        asyncio.run(time_windows(postgres.dsn, args.windows, args.days, sys.stdout))
    finally:
        postgres.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
