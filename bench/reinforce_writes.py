"""What reinforcement writes at 100k facts, statement by statement: `EXPLAIN (ANALYZE,
BUFFERS, WAL)` of one access-buffer flush (engine/lifecycle/access.py) and of one lifecycle
batch's fold and decay (engine/lifecycle/maintenance.py), each in a transaction rolled back.

A flush every 5 s at 27 recalls/s of ~80 facts each sends ~4,000 distinct ids. The first
flush after a fold inserts its side rows; later ones update them in place (the steady state):
both are shown, the later after one flush committed. Runs against the bank
`bench/recall_latency.py` built, on a copy (it writes: side rows, dead row versions, WAL).

    .venv/bin/python -m bench.reinforce_writes --data-dir COPY --ids 4000 --runs 3
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
from datetime import UTC, datetime, timedelta

import asyncpg

from bench.in_process import bench_database
from bench.recall_latency import BANK, DEFAULT_DATA_DIR
from engine.db import migrate
from engine.embedding import load_embedder
from engine.lifecycle.access import DEFAULT_STEP, REINFORCE_SQL, reinforce
from engine.lifecycle.importance import BASE as NEUTRAL_IMPORTANCE
from engine.lifecycle.maintenance import FOLD_AND_DECAY_SQL
from engine.lifecycle.payloads import BATCH_SIZE
from engine.lifecycle.policy import LifecyclePolicy

_FIGURES = re.compile(r"^(Execution Time|  WAL|  Buffers|  Tuples Inserted|  Conflicting)")


async def explain(
    conn: asyncpg.Connection, label: str, sql: str, args: tuple[object, ...], runs: int
) -> None:
    """The statement's plan figures, each run rolled back; the last run's printed."""
    lines: list[str] = []
    for _ in range(runs):
        transaction = conn.transaction()
        await transaction.start()
        try:
            plan = await conn.fetch("EXPLAIN (ANALYZE, BUFFERS, WAL, TIMING OFF) " + sql, *args)
        finally:
            await transaction.rollback()
        lines = [r[0].strip() for r in plan if _FIGURES.match(r[0])]
    print(f"{label}:\n    " + "\n    ".join(lines), flush=True)


async def run(database_url: str, ids_wanted: int, runs: int) -> None:
    embedder = load_embedder("minilm")
    await migrate(database_url, embedder.dimension, embedder.space)
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute("DELETE FROM fact_access WHERE bank_id = $1", BANK)
        ids = sorted(
            r["id"]
            for r in await conn.fetch(
                "SELECT id::text AS id FROM memory_units WHERE bank_id = $1"
                " ORDER BY md5(id::text) LIMIT $2",
                BANK,
                ids_wanted,
            )
        )
        counts = [1 + (i % 3 == 0) for i in range(len(ids))]  # a third returned twice
        now = datetime.now(UTC)
        flush = (BANK, ids, now, DEFAULT_STEP, counts)
        print(f"bank {BANK}: a flush of {len(ids):,} facts, {runs} runs each", flush=True)
        await explain(conn, "first flush (inserts the side rows)", REINFORCE_SQL, flush, runs)
        await reinforce(conn, BANK, dict(zip(ids, counts, strict=True)), now)
        await explain(conn, "a later flush (updates them)", REINFORCE_SQL, flush, runs)
        batch = [
            r["id"]
            for r in await conn.fetch(
                "SELECT id FROM memory_units WHERE bank_id = $1 AND state IN ('active', 'archived')"
                " ORDER BY id LIMIT $2",
                BANK,
                BATCH_SIZE,
            )
        ]
        pending = await conn.fetchval(
            "SELECT count(*) FROM fact_access WHERE bank_id = $1 AND fact_id <= $2",
            BANK,
            batch[-1],
        )
        policy = LifecyclePolicy()
        decay = (
            BANK,
            batch,
            policy.decay_rate,
            now + timedelta(days=1),
            policy.importance_scaled_decay,
            NEUTRAL_IMPORTANCE,
            None,
            str(batch[-1]),
        )
        await explain(
            conn,
            f"a lifecycle batch of {len(batch)} facts, {pending} with side rows: fold and decay",
            FOLD_AND_DECAY_SQL,
            decay,
            runs,
        )
        await conn.execute("DELETE FROM fact_access WHERE bank_id = $1", BANK)
    finally:
        await conn.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ids", type=int, default=4000, help="distinct facts in the flush")
    parser.add_argument("--runs", type=int, default=3, help="runs of each, the last printed")
    parser.add_argument("--database-url", default="", help="an existing PostgreSQL")
    parser.add_argument(
        "--data-dir", default=str(DEFAULT_DATA_DIR), help="recall_latency's embedded PostgreSQL"
    )
    args = parser.parse_args()
    with bench_database(args.database_url, args.data_dir, "recall_latency") as database_url:
        asyncio.run(run(database_url, args.ids, args.runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
