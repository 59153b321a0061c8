"""The skewed journal's consolidation, in process (`bench.entity_skew --consolidate` and
`--consolidate-only`): the bank's backlog consolidated from scratch in batches, as the activity
runs them, printing facts/s over time, time per statement and the encoder's time."""

from __future__ import annotations

import asyncio
import os
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TextIO

import asyncpg
from asyncpg.connection import LoggedQuery

from activities.consolidation import LOCAL_BATCH_FACTS
from engine.consolidation.batch import consolidate_local_batch
from engine.consolidation.encode import EncodedText, TextEncoder, text_encoder
from engine.db import create_pool, migrate
from engine.embedding import load_embedder
from worker.main import CPU_THREADS

_RESET_OBSERVATIONS = (
    "DELETE FROM memory_units WHERE bank_id = $1 AND fact_type = 'observation'",
    # every fact back on the backlog (engine/store/backlog.py)
    "INSERT INTO consolidation_backlog (fact_id, bank_id, event_at)"
    " SELECT id, bank_id, coalesce(occurred_start, mentioned_at, created_at) FROM memory_units"
    " WHERE bank_id = $1 AND fact_type <> 'observation' ON CONFLICT DO NOTHING",
    "UPDATE banks SET config = config || '{\"enable_observations\": true}' WHERE bank_id = $1",
    # a kept home's earlier run recorded its batches under the same operation id: they would
    # answer the first batches of this run without consolidating anything
    "DELETE FROM consolidation_batches WHERE bank_id = $1",
)

# Facts waiting for consolidation.
BACKLOG = "SELECT count(*) FROM consolidation_backlog WHERE bank_id = $1"
# Row versions memory_units has been given by updates, and how many of them stayed on their
# page with no index entry (HOT); the counters are cumulative.
_UNIT_UPDATES = """
SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'memory_units'
"""
_UNIT_TIMES_SIZE = "SELECT pg_total_relation_size('unit_times'), (SELECT count(*) FROM unit_times)"


@dataclass
class EncoderTime:
    """Wall time spent in the encoder (the model run, off the event loop)."""

    seconds: float = 0.0
    calls: int = 0
    texts: int = 0


@dataclass
class QueryTimes:
    """Client-side time per statement (round trip included), from asyncpg's query logger."""

    seconds: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    calls: Counter[str] = field(default_factory=Counter)

    def log(self, query: LoggedQuery) -> None:
        key = " ".join(query.query.split())[:110]
        self.seconds[key] += query.elapsed
        self.calls[key] += 1

    def write(self, out: TextIO, top: int = 15) -> None:
        total, calls = sum(self.seconds.values()), sum(self.calls.values())
        out.write(f"statements from the client: {total:.1f} s in {calls:,} round trips\n")
        for key, seconds in sorted(self.seconds.items(), key=lambda kv: -kv[1])[:top]:
            out.write(f"  {seconds:7.1f} s  {self.calls[key]:8,} x  {key}\n")


def timed(encode: TextEncoder, spent: EncoderTime) -> TextEncoder:
    async def run(texts: Sequence[str]) -> list[EncodedText]:
        started = time.perf_counter()
        try:
            return await encode(texts)
        finally:
            spent.seconds += time.perf_counter() - started
            spent.calls += 1
            spent.texts += len(texts)

    return run


async def consolidate_in_process(
    dsn: str, bank: str, every: float, budget_s: float | None, out: TextIO
) -> tuple[int, float]:
    """Consolidate the bank's backlog from scratch: (facts consolidated, seconds)."""
    embedder = load_embedder("minilm")
    # a kept --home may predate the code's migrations (0032: observations' own HNSW index)
    started = time.perf_counter()
    applied = await migrate(dsn, embedder.dimension, embedder.space)
    if applied:
        out.write(
            f"migrated first: {', '.join(applied)} in {time.perf_counter() - started:.1f} s\n"
        )
    updated = await _unit_updates(dsn)
    # The worker's pool (worker/main.py): PostgreSQL chooses generic plans where no worse.
    pool = await create_pool(dsn, max_size=2, custom_plans=False)
    cpu = ThreadPoolExecutor(CPU_THREADS)
    try:
        for statement in _RESET_OBSERVATIONS:
            await pool.execute(statement, bank)
        await pool.execute("ANALYZE")
        spent, queries = EncoderTime(), QueryTimes()
        encode = timed(text_encoder(embedder, cpu), spent)
        first = int(await pool.fetchval(BACKLOG, bank))
        out.write(f"consolidating {first:,} facts in process (local path, batches of")
        out.write(
            f" {LOCAL_BATCH_FACTS})\n   time      done   backlog  facts/s (interval)"
            "  observations  load\n"
        )
        started = time.perf_counter()
        last_t, last_n, backlog, seq, made = 0.0, first, first, 0, 0
        while backlog and (budget_s is None or time.perf_counter() - started < budget_s):
            async with pool.acquire() as conn:
                conn.add_query_logger(queries.log)
                try:
                    result = await consolidate_local_batch(
                        conn, bank, "bench-consolidate", LOCAL_BATCH_FACTS, encode, seq, side=pool
                    )
                finally:
                    conn.remove_query_logger(queries.log)
            seq += 1
            backlog = result.backlog
            made += result.counts.created - result.counts.merged
            now = time.perf_counter() - started
            if now - last_t >= every or not backlog:
                rate = (last_n - backlog) / (now - last_t)
                out.write(
                    f"{now:7.0f}  {first - backlog:8,}  {backlog:8,}  {rate:18.1f}"
                    f"  {made:12,}  {os.getloadavg()[0]:4.1f}\n"
                )
                out.flush()
                last_t, last_n = now, backlog
        elapsed = time.perf_counter() - started
        made = await pool.fetchval(
            "SELECT count(*) FROM memory_units WHERE bank_id = $1 AND fact_type = 'observation'",
            bank,
        )
        done = first - backlog
        out.write(
            f"consolidation: {done:,} facts in {elapsed:.0f} s = {done / elapsed:.1f} facts/s;"
            f" {made:,} observations; {backlog:,} left; encoder {spent.seconds:.1f} s"
            f" ({spent.calls:,} calls, {spent.texts:,} texts)\n"
        )
        queries.write(out)
    finally:
        cpu.shutdown()
        await pool.close()
    await _write_unit_writes(dsn, updated, out)
    return done, elapsed


async def _unit_updates(dsn: str) -> tuple[int, int]:
    conn = await asyncpg.connect(dsn)
    try:
        row = await conn.fetchrow(_UNIT_UPDATES)
    finally:
        await conn.close()
    return (int(row[0]), int(row[1])) if row else (0, 0)


async def _write_unit_writes(dsn: str, before: tuple[int, int], out: TextIO) -> None:
    """memory_units' updates during the run and how many were HOT, once the pool's sessions
    have reported their counters (a session reports them as it ends); unit_times' size."""
    after, waited = await _unit_updates(dsn), 0.0
    while waited < 10:
        await asyncio.sleep(0.5)
        waited += 0.5
        now = await _unit_updates(dsn)
        if now == after:
            break
        after = now
    updates, hot = after[0] - before[0], after[1] - before[1]
    share = f" ({hot / updates:.1%})" if updates else ""
    out.write(f"memory_units rows updated: {updates:,}, in place (HOT): {hot:,}{share}\n")
    conn = await asyncpg.connect(dsn)
    try:
        row = await conn.fetchrow(_UNIT_TIMES_SIZE)
    finally:
        await conn.close()
    assert row is not None
    size, units = int(row[0]), int(row[1])
    out.write(
        f"unit_times: {size / 1e6:.1f} MB for {units:,} units"
        f" ({size / max(units, 1):.0f} B a unit)\n"
    )
