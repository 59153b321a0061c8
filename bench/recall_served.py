"""Recall at 100k facts through real server processes: `python -m server` on a port, with
ENGRAM_API_PROCESSES=1, 2, ..., and the clients in this process over HTTP.

`bench/recall_latency.py` runs the app in the bench's own process (httpx's ASGI transport),
so its four clients' request building and JSON parsing share the server's one interpreter
lock, and it cannot show what a second server process buys. This bench serves the bank
`recall_latency` built (run that first, or give its `--data-dir`) the way `engram up` does:
uvicorn, sockets, one pool, model and cache per process. Temporal is a dev server of the
bench's own (the server connects to it at start; recall never uses it).

    .venv/bin/python -m bench.recall_served --data-dir DIR --processes 1,2 --clients 1,4

For each process count: start the server, recall until every process holds the bank in
memory (each reads its graph and token vectors after its first recall of the bank: the
keyword arm's trace says "from memory"), an untimed warm-up, then the timed recalls for each
client count. CPU per recall is read from /proc for the server's processes, PostgreSQL and
this client, so runs on a loaded host stay comparable.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Final

import asyncpg
import httpx

from bench.in_process import bench_database, percentile
from bench.recall_latency import (
    BANK,
    DAYS,
    DEFAULT_DATA_DIR,
    SEED,
    START,
    URL,
    measure,
    recall_body,
)
from bench.recall_profile import CpuClock, parent_of
from bench.server_processes import free_port
from bench.synthetic_facts import SyntheticQuery, generate_facts, generate_queries
from engine.settings import Settings
from engram.supervisor import SINGLE_THREADED
from engram.temporal_server import TemporalDevServer

READY_TIMEOUT_S: Final = 180.0
HELD_TIMEOUT_S: Final = 300.0
# Consecutive traced recalls answered from memory, per server process, before measuring.
HELD_IN_A_ROW: Final = 12
# The server writes recalls' accesses every 5 s (AccessBuffer); wait that long around a run.
FLUSH_S: Final = 6.0


@dataclass
class Run:
    processes: int
    clients: int
    recalls: int
    errors: int
    seconds: float
    p50_ms: float
    p95_ms: float
    throughput_qps: float
    # CPU milliseconds per recall: the server's processes, PostgreSQL, this client.
    server_cpu_ms: float
    postgres_cpu_ms: float | None
    client_cpu_ms: float
    # memory_units rows the run rewrote (reinforcement: server/.. AccessBuffer), and how many
    # of them in place (HOT: no index entry written; otherwise every index gets one, HNSW too).
    rows_updated: int
    rows_updated_hot: int
    # fact_access rows reinforcement wrote (migration 0041: inserted or updated), and WAL
    # bytes per recall (every writer of the cluster: the figure a row version shows in)
    access_rows_written: int
    wal_bytes: float
    load: str


@contextmanager
def temporal_server(home: Path) -> Iterator[str]:
    server = TemporalDevServer(
        home / "temporal.db", home / "temporal.log", free_port(), free_port(), ui=False
    )
    server.start()
    try:
        yield server.address
    finally:
        server.stop()


@contextmanager
def served(
    args: argparse.Namespace, database_url: str, temporal: str, processes: int, home: Path
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """`python -m server` with this many processes; its base URL and process."""
    port = free_port()
    env = dict(os.environ)
    env.update(
        ENGRAM_HOME=str(home),
        ENGRAM_DATABASE_URL=database_url,
        ENGRAM_TEMPORAL_ADDRESS=temporal,
        ENGRAM_API_PORT=str(port),
        ENGRAM_API_PROCESSES=str(processes),
        ENGRAM_RECALL_TOKEN_CACHE_MB=str(args.token_cache_mb),
        PYTHONUNBUFFERED="1",
    )
    if args.graph_cache_mb is not None:
        env["ENGRAM_RECALL_GRAPH_CACHE_MB"] = str(args.graph_cache_mb)
    for name in SINGLE_THREADED:
        env.setdefault(name, "1")
    log = (home / f"server-{processes}.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "server"], env=env, stdout=log, stderr=subprocess.STDOUT
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            if process.poll() is not None:
                raise SystemExit(f"the server exited with {process.returncode}: see {log.name}")
            try:
                if httpx.get(f"{base}/ready", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit(f"the server did not start: see {log.name}")
            time.sleep(0.5)
        yield base, process
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


async def hold(base: str, queries: list[SyntheticQuery], processes: int) -> int:
    """Recall (traced, each on a new connection, so the kernel hands them to the processes
    at random) until HELD_IN_A_ROW × processes in a row were answered from memory; returns
    the recalls it took. On kept-alive connections every recall can reach the same process,
    and the other reads its graph only when the timed recalls reach it (three early runs
    measured that: PostgreSQL 72-76 ms a recall with 2 processes and 1 client)."""
    wanted = HELD_IN_A_ROW * processes
    in_a_row = sent = 0
    deadline = time.monotonic() + HELD_TIMEOUT_S
    rng = random.Random(SEED)
    fresh = httpx.Limits(max_keepalive_connections=0)
    async with httpx.AsyncClient(base_url=base, timeout=60, limits=fresh) as client:
        while in_a_row < wanted:
            if time.monotonic() > deadline:
                raise SystemExit(f"the bank was not held in memory within {HELD_TIMEOUT_S:.0f} s")
            batch = rng.sample(queries, 2 * processes)
            responses = await asyncio.gather(
                *(
                    client.post(URL.format(bank=BANK), json=recall_body(q, trace=True))
                    for q in batch
                )
            )
            sent += len(batch)
            for response in responses:
                response.raise_for_status()
                note = response.json()["trace"]["arms"]["keyword"].get("note") or ""
                in_a_row = in_a_row + 1 if note.startswith("from memory") else 0
            if in_a_row < wanted:
                await asyncio.sleep(0.5)  # graphs and token vectors read in the background
    return sent


@dataclass(frozen=True)
class Writes:
    facts: int  # memory_units row updates
    facts_hot: int  # of which HOT
    access_rows: int  # fact_access rows inserted or updated (0 without migration 0041)
    wal: int  # the WAL position, bytes


async def updates(database_url: str) -> Writes:
    """memory_units' row updates so far (and the HOT ones), fact_access's writes, the WAL
    position. A backend reports its counts at most once a second, and an idle one only after
    up to ~10 s: the last seconds of a run can be missed (a 20-recall run read 0), so the
    counts are a floor for short runs."""
    await asyncio.sleep(1.5)
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute("SELECT pg_stat_clear_snapshot()")
        row = await conn.fetchrow(
            "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables "
            "WHERE relname = 'memory_units'"
        )
        access = await conn.fetchval(
            "SELECT n_tup_ins + n_tup_upd FROM pg_stat_user_tables WHERE relname = 'fact_access'"
        )
        wal = await conn.fetchval("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn")
        return Writes(
            int(row["n_tup_upd"]) if row else 0,
            int(row["n_tup_hot_upd"]) if row else 0,
            int(access or 0),
            int(wal),
        )
    finally:
        await conn.close()


async def measure_served(
    base: str,
    database_url: str,
    process: subprocess.Popen[bytes],
    postmaster: int | None,
    args: argparse.Namespace,
    processes: int,
    queries: list[SyntheticQuery],
) -> list[Run]:
    warmup, timed = queries[: args.warmup], queries[args.warmup :]
    limits = httpx.Limits(max_connections=max(args.clients) + 2 * processes)
    async with httpx.AsyncClient(base_url=base, timeout=60, limits=limits) as client:
        took = await hold(base, warmup, processes)
        print(f"  {processes} process(es): the bank held after {took} traced recalls", flush=True)
        await measure(client, warmup, max(args.clients))
        runs = []
        for clients in args.clients:
            await asyncio.sleep(FLUSH_S)  # the warm-up's accesses written first
            writes0 = await updates(database_url)
            server0 = CpuClock.tree_seconds(process.pid) or 0.0
            postgres0 = CpuClock.postgres_seconds(postmaster)
            client0 = time.process_time()
            latencies, errors, seconds = await measure(client, timed, clients)
            client1 = time.process_time()
            await asyncio.sleep(FLUSH_S)  # this run's accesses written, and counted in its CPU
            server1 = CpuClock.tree_seconds(process.pid) or 0.0
            postgres1 = CpuClock.postgres_seconds(postmaster)
            writes1 = await updates(database_url)
            done = max(1, len(latencies))
            ordered = sorted(latencies)
            run = Run(
                processes=processes,
                clients=clients,
                recalls=len(latencies),
                errors=errors,
                seconds=round(seconds, 2),
                p50_ms=round(percentile(ordered, 0.50), 1),
                p95_ms=round(percentile(ordered, 0.95), 1),
                throughput_qps=round(len(latencies) / seconds, 1) if seconds else 0.0,
                server_cpu_ms=round((server1 - server0) * 1000 / done, 1),
                postgres_cpu_ms=(
                    round((postgres1 - postgres0) * 1000 / done, 1)
                    if postgres0 is not None and postgres1 is not None
                    else None
                ),
                client_cpu_ms=round((client1 - client0) * 1000 / done, 1),
                rows_updated=writes1.facts - writes0.facts,
                rows_updated_hot=writes1.facts_hot - writes0.facts_hot,
                access_rows_written=writes1.access_rows - writes0.access_rows,
                wal_bytes=round((writes1.wal - writes0.wal) / done),
                load=" ".join(f"{x:.1f}" for x in os.getloadavg()),
            )
            print(
                f"  {processes} process(es), {clients} client(s): {run.recalls} recalls in "
                f"{run.seconds}s · p50 {run.p50_ms} ms · p95 {run.p95_ms} ms · "
                f"{run.throughput_qps} recalls/s · CPU per recall: server {run.server_cpu_ms}, "
                f"PostgreSQL {run.postgres_cpu_ms}, client {run.client_cpu_ms} ms · "
                f"rows updated {run.rows_updated:,} ({run.rows_updated_hot:,} HOT) · "
                f"fact_access rows written {run.access_rows_written:,} · "
                f"WAL {run.wal_bytes / 1024:.1f} kB a recall · "
                f"errors {run.errors} · load {run.load}",
                flush=True,
            )
            runs.append(run)
        return runs


async def postgres_pid(database_url: str) -> int | None:
    conn = await asyncpg.connect(database_url)
    try:
        facts = await conn.fetchval(
            "SELECT count(*) FROM memory_units WHERE bank_id = $1 AND fact_type <> 'observation'",
            BANK,
        )
        print(f"bank {BANK}: {facts:,} facts", flush=True)
        return parent_of(await conn.fetchval("SELECT pg_backend_pid()"))
    finally:
        await conn.close()


def run(args: argparse.Namespace, database_url: str) -> list[Run]:
    postmaster = asyncio.run(postgres_pid(database_url))
    _, vocab = generate_facts(args.facts, seed=SEED, start=START, days=DAYS)
    queries = generate_queries(args.queries + args.warmup, vocab, seed=SEED, start=START, days=DAYS)
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="engram-served-") as scratch:
        home = Path(scratch)
        with temporal_server(home) as temporal:
            for processes in args.processes:
                with served(args, database_url, temporal, processes, home) as (base, process):
                    runs += asyncio.run(
                        measure_served(
                            base, database_url, process, postmaster, args, processes, queries
                        )
                    )
    return runs


def counts(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give counts like 1,2") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: counts are at least 1")
    return values


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--facts", type=int, default=100_000, help="as recall_latency built")
    parser.add_argument("--processes", type=counts, default=[1, 2], help="e.g. 1,2")
    parser.add_argument("--clients", type=counts, default=[1, 4], help="e.g. 1,4")
    parser.add_argument("--queries", type=int, default=300, help="timed recalls per run")
    parser.add_argument("--warmup", type=int, default=100, help="untimed recalls first")
    parser.add_argument("--database-url", default="", help="an existing PostgreSQL")
    parser.add_argument(
        "--data-dir", default=str(DEFAULT_DATA_DIR), help="recall_latency's embedded PostgreSQL"
    )
    parser.add_argument(
        "--token-cache-mb", type=int, default=Settings(home=Path()).recall_token_cache_mb
    )
    parser.add_argument(
        "--graph-cache-mb", type=int, default=None, help="default: the server's own default"
    )
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    with bench_database(args.database_url, args.data_dir, "recall_latency") as database_url:
        runs = run(args, database_url)
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in runs], indent=2))
    return 1 if any(r.errors for r in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
