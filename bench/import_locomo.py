"""Bulk import throughput: all 10 LoCoMo conversations (5,882 turns) with the local extractor.

Self-contained: it starts its own embedded PostgreSQL and Temporal dev server in a temporary
home, one worker process (`python -m worker`, as `engram up` runs it) and the HTTP app in
process, imports `locomo10.json` through `POST .../import`, and waits for the import to
finish. Then, with the worker stopped, it times the embedding step alone: the same model call
the embed activity makes (`embed_with_tokens`) on every stored fact, in the same model
batches (`engine.retain.staging.model_batches`: MODEL_BATCH texts of similar length) over a
pool of the worker's CPU_THREADS threads. It prints wall time, turns/s,
the embedding-only time and their ratio, the CPU seconds each process spent on the import
(worker, PostgreSQL with its backends, the Temporal dev server, this process's HTTP app; from
/proc, so comparable across runs on a shared machine where wall time is not), and where the
worker spent its time (per-activity sums from its Prometheus endpoint,
`engram_activity_duration_seconds`).

The bank is created with observations off, so neither the consolidation sweep (every 10
minutes, whenever it falls) nor the consolidation requested after the import competes with
the measured work; `--observations` keeps the bank's default (on).

    .venv/bin/python -m bench.import_locomo [--data PATH] [--json out.json] [--observations]
                                            [--pg-stats] [--home DIR]

`--pg-stats` loads pg_stat_statements into the embedded PostgreSQL and prints the statements
that took the most execution time during the import; `--home` keeps the databases afterwards.

Targets (issue 5): at least 100 turns/s, and at most 1.25x the embedding-only time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractAsyncContextManager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

import asyncpg
import httpx
from prometheus_client.parser import text_string_to_metric_families
from temporalio.client import Client

from engine.db import create_pool, migrate
from engine.embedding import Embedder, load_embedder
from engine.retain.staging import model_batches
from engine.settings import Settings
from engram.postgres import EmbeddedPostgres
from engram.temporal_server import TemporalDevServer
from server.app import create_app
from server.services import Services
from worker.main import CPU_THREADS
from workflows.converter import converter_for

DEFAULT_DATA: Final = Path("../shared/data/locomo/locomo10.json")
TARGET_TURNS_PER_S: Final = 100.0
TARGET_RATIO: Final = 1.25
POLL_S: Final = 0.5
IMPORT_TIMEOUT_S: Final = 3600.0
WORKER_READY_TIMEOUT_S: Final = 120.0


@dataclass(frozen=True)
class ActivityTime:
    activity: str
    attempts: int
    seconds: float


@dataclass(frozen=True)
class CpuSeconds:
    """CPU seconds (user + system) each process spent between the import's start and end."""

    worker: float
    postgres: float  # the postmaster, its backends and background workers
    temporal: float
    bench: float  # this process: the HTTP app the import goes through, and its polling

    @property
    def total(self) -> float:
        return self.worker + self.postgres + self.temporal + self.bench


@dataclass(frozen=True)
class Statement:
    """One statement's share of PostgreSQL's execution time during the import."""

    seconds: float  # execution time, which includes waiting for a CPU
    calls: int
    rows: int
    query: str


# pg_stat_statements is loaded only with --pg-stats: it costs a little on every statement.
PG_STATS_OPTIONS: Final = ("shared_preload_libraries=pg_stat_statements",)
PG_STATS_TOP: Final = 12


async def reset_statements(dsn: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        await conn.execute("SELECT pg_stat_statements_reset()")
    finally:
        await conn.close()


async def top_statements(dsn: str) -> list[Statement]:
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(
            "SELECT total_exec_time / 1000 AS seconds, calls, rows,"
            " regexp_replace(query, '\\s+', ' ', 'g') AS query"
            " FROM pg_stat_statements ORDER BY total_exec_time DESC LIMIT $1",
            PG_STATS_TOP,
        )
    finally:
        await conn.close()
    return [Statement(r["seconds"], r["calls"], r["rows"], r["query"]) for r in rows]


@dataclass(frozen=True)
class Report:
    links: bool
    observations: bool
    turns: int
    documents: int
    facts: int
    wall_s: float
    turns_per_s: float
    embedding_only_s: float
    ratio: float
    cpu: CpuSeconds
    embedding_only_cpu_s: float
    activities: list[ActivityTime]
    statements: list[Statement]  # with --pg-stats


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def scrape_activity_times(port: int) -> list[ActivityTime]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as response:
        text = response.read().decode()
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    for family in text_string_to_metric_families(text):
        if family.name != "engram_activity_duration_seconds":
            continue
        for sample in family.samples:
            name = sample.labels.get("activity", "")
            if sample.name.endswith("_sum"):
                sums[name] = sample.value
            elif sample.name.endswith("_count"):
                counts[name] = int(sample.value)
    return sorted(
        (ActivityTime(name, counts.get(name, 0), sums[name]) for name in sums),
        key=lambda a: -a.seconds,
    )


def wait_for_worker(port: int, worker: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + WORKER_READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if worker.poll() is not None:
            raise SystemExit(f"the worker exited with code {worker.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1):
                return
        except OSError:
            time.sleep(0.5)
    raise SystemExit("the worker did not start")


def own_cpu() -> float:
    times = os.times()
    return times.user + times.system


def tree_cpu(pid: int) -> float:
    """CPU seconds of a process and its descendants, live or reaped (Linux /proc)."""
    clock = os.sysconf("SC_CLK_TCK")
    parent: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            raw = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = raw[raw.rindex(")") + 2 :].split()
        parent[int(entry)] = int(fields[1])
        # utime, stime, and cutime, cstime: the children it has reaped.
        ticks[int(entry)] = sum(int(f) for f in fields[11:15])
    tree = {pid}
    grew = True
    while grew:
        found = {p for p, pp in parent.items() if pp in tree} - tree
        tree |= found
        grew = bool(found)
    return sum(ticks.get(p, 0) for p in tree) / clock


def time_embedding(embedder: Embedder, texts: list[str]) -> tuple[float, float]:
    """The embed activity's model call on every fact, as the worker's CPU pool runs it:
    (wall seconds, CPU seconds)."""
    batches = [[texts[i] for i in run] for run in model_batches(texts)]
    started, cpu = time.perf_counter(), own_cpu()
    with ThreadPoolExecutor(CPU_THREADS) as pool:
        list(pool.map(embedder.embed_with_tokens, batches))
    return time.perf_counter() - started, own_cpu() - cpu


NO_LINKS: Final = {
    "enable_entity_links": False,
    "enable_semantic_links": False,
    "enable_temporal_links": False,
    "enable_causal_links": False,
}


async def run_import(
    client: httpx.AsyncClient, content: str, bank: str, config: dict[str, bool], out: Any
) -> tuple[dict[str, Any], float]:
    if config:
        response = await client.put(f"/v1/default/banks/{bank}", json=config)
        if response.status_code != 200:
            raise SystemExit(f"cannot configure the bank: {response.text[:300]}")
    started = time.perf_counter()
    response = await client.post(
        f"/v1/default/banks/{bank}/import",
        json={"content": content, "name": "locomo10.json", "format": "locomo"},
    )
    if response.status_code != 202:
        raise SystemExit(f"import refused: {response.status_code} {response.text[:300]}")
    operation_id = response.json()["operation_id"]
    while time.perf_counter() - started < IMPORT_TIMEOUT_S:
        status: dict[str, Any] = (await client.get(f"/v1/default/imports/{operation_id}")).json()
        progress = status["progress"]
        out.write(
            f"\r  {time.perf_counter() - started:6.1f} s  documents "
            f"{progress.get('documents_done', 0)}/{progress.get('documents_total', 0)}  items "
            f"{progress.get('items_done', 0)}/{progress.get('items_total', 0)}  facts "
            f"{progress.get('facts_added', 0)}   "
        )
        out.flush()
        if status["status"] in ("completed", "failed", "cancelled"):
            out.write("\n")
            return status, time.perf_counter() - started
        await asyncio.sleep(POLL_S)
    raise SystemExit("the import did not finish in time")


async def import_and_collect(
    settings: Settings, embedder: Embedder, content: str, config: dict[str, bool], out: Any
) -> tuple[dict[str, Any], float, list[str]]:
    """Import through the app, then read back every stored fact's text."""
    await migrate(settings.database_url, embedder.dimension, embedder.space)
    pool = await create_pool(settings.database_url, max_size=4)
    cpu = ThreadPoolExecutor(CPU_THREADS)
    try:
        temporal = await Client.connect(
            settings.resolved_temporal_address, data_converter=converter_for(settings)
        )
        app = create_app(_unused)
        app.state.services = Services(settings, pool, temporal, embedder, cpu)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
            status, wall = await run_import(client, content, "locomo", config, out)
        async with pool.acquire() as conn:
            # Observations are left out: the consolidation the import requests may have
            # added a few by now, and they are not the import's embedding work.
            rows = await conn.fetch(
                "SELECT text FROM memory_units WHERE fact_type <> 'observation'"
            )
            texts = [r["text"] for r in rows]
        return status, wall, texts
    finally:
        cpu.shutdown()
        await pool.close()


def bench(
    data: Path, home: Path, links: bool, observations: bool, pg_stats: bool, out: Any
) -> Report:
    content = data.read_text(encoding="utf-8")
    postgres = EmbeddedPostgres(
        home / "postgres", home / "postgres.log", PG_STATS_OPTIONS if pg_stats else ()
    )
    temporal = TemporalDevServer(
        home / "temporal.db", home / "temporal.log", free_port(), free_port(), ui=False
    )
    postgres.start()
    temporal.start()
    metrics_port = free_port()
    worker: subprocess.Popen[bytes] | None = None
    try:
        embedder = load_embedder("minilm")
        settings = Settings(
            home=home,
            database_url=postgres.dsn,
            temporal_address=temporal.address,
            task_queue="bench-import",
            extraction_mode="local",
        )
        env = {
            **os.environ,
            "ENGRAM_DATABASE_URL": postgres.dsn,
            "ENGRAM_TEMPORAL_ADDRESS": temporal.address,
            "ENGRAM_TASK_QUEUE": settings.task_queue,
            "ENGRAM_WORKER_METRICS_PORT": str(metrics_port),
            "ENGRAM_EXTRACTION_MODE": "local",
            "ENGRAM_HOME": str(home),  # the payload key the app and the worker share
        }
        with (home / "worker.log").open("ab") as log:
            worker = subprocess.Popen(
                [sys.executable, "-m", "worker"], env=env, stdout=log, stderr=log
            )
        wait_for_worker(metrics_port, worker)
        config = {} if links else dict(NO_LINKS)
        if not observations:
            config["enable_observations"] = False
        assert postgres.process is not None and temporal.process is not None
        pids = {"postgres": postgres.process.pid, "temporal": temporal.process.pid}
        if pg_stats:
            asyncio.run(reset_statements(postgres.dsn))
        out.write(f"importing {data} (worker log: {home / 'worker.log'})\n")
        before = {name: tree_cpu(pid) for name, pid in {**pids, "worker": worker.pid}.items()}
        own = own_cpu()
        status, wall, texts = asyncio.run(
            import_and_collect(settings, embedder, content, config, out)
        )
        own = own_cpu() - own
        if status["status"] != "completed":
            raise SystemExit(f"the import ended {status['status']}: {status['error']}")
        activities = scrape_activity_times(metrics_port)
        statements = asyncio.run(top_statements(postgres.dsn)) if pg_stats else []
        after = {name: tree_cpu(pid) for name, pid in {**pids, "worker": worker.pid}.items()}
        cpu = CpuSeconds(
            worker=after["worker"] - before["worker"],
            postgres=after["postgres"] - before["postgres"],
            temporal=after["temporal"] - before["temporal"],
            bench=own,
        )
        worker.terminate()
        worker.wait(30)
        out.write(f"embedding {len(texts):,} facts alone...\n")
        embedding, embedding_cpu = time_embedding(embedder, texts)
        turns = int(status["items"])
        return Report(
            links=links,
            observations=observations,
            turns=turns,
            documents=int(status["documents"]),
            facts=len(texts),
            wall_s=wall,
            turns_per_s=turns / wall,
            embedding_only_s=embedding,
            ratio=wall / embedding,
            cpu=cpu,
            embedding_only_cpu_s=embedding_cpu,
            activities=activities,
            statements=statements,
        )
    finally:
        if worker is not None and worker.poll() is None:
            worker.kill()
            worker.wait()
        temporal.stop()
        postgres.stop()


def _unused() -> AbstractAsyncContextManager[Services]:
    raise AssertionError("the bench opens the services itself")


def print_report(report: Report, out: Any) -> None:
    out.write(
        f"\nturns {report.turns:,}  documents {report.documents}  facts {report.facts:,}"
        f"  links {'on' if report.links else 'off'}"
        f"  observations {'on' if report.observations else 'off'}\n"
        f"wall time          {report.wall_s:8.1f} s   {report.turns_per_s:6.1f} turns/s"
        f"   (target >= {TARGET_TURNS_PER_S:.0f})\n"
        f"embedding alone    {report.embedding_only_s:8.1f} s   ratio {report.ratio:.2f}x"
        f"   (target <= {TARGET_RATIO:.2f}x)\n\n"
        f"CPU seconds during the import   worker {report.cpu.worker:.1f}"
        f"   postgres {report.cpu.postgres:.1f}   temporal {report.cpu.temporal:.1f}"
        f"   bench app {report.cpu.bench:.1f}   total {report.cpu.total:.1f}\n"
        f"CPU seconds of the embedding alone   {report.embedding_only_cpu_s:.1f}"
        f"   (all but this is the pipeline's overhead:"
        f" {report.cpu.total - report.embedding_only_cpu_s:.1f})\n\n"
        "worker time by activity (sum over attempts; activities overlap, so the sums exceed\n"
        "the wall time):\n"
    )
    for a in report.activities:
        mean = a.seconds / a.attempts if a.attempts else 0.0
        out.write(f"  {a.activity:<26} {a.seconds:8.1f} s  {a.attempts:6,} x  {mean:7.3f} s\n")
    if report.statements:
        out.write("\nPostgreSQL statements by execution time (pg_stat_statements):\n")
    for s in report.statements:
        out.write(f"  {s.seconds:7.2f} s  {s.calls:7,} x  {s.rows:8,} rows  {s.query[:90]}\n")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--home", type=Path, help="keep the databases here (default: a temp dir)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument(
        "--no-links",
        action="store_true",
        help="import into a bank with every link type off (to measure what linking costs)",
    )
    parser.add_argument(
        "--observations",
        action="store_true",
        help="leave observations on: consolidation may then run during the import",
    )
    parser.add_argument(
        "--pg-stats",
        action="store_true",
        help="load pg_stat_statements and print the statements that took the most time",
    )
    args = parser.parse_args(argv)
    if not args.data.exists():
        print(f"bench: {args.data}: no such file", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="engram-bench-") as scratch:
        home = args.home or Path(scratch)
        report = bench(
            args.data, home, not args.no_links, args.observations, args.pg_stats, sys.stdout
        )
    print_report(report, sys.stdout)
    if args.json:
        args.json.write_text(json.dumps(asdict(report), indent=2))
    return 0


if __name__ == "__main__":
    # An explicit exit: the Temporal client's native runtime can abort at interpreter teardown.
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
