"""Write throughput, side by side: the retain API used as the reference client uses it, and
`engram import`, on the same LoCoMo conversations, in one run.

API pattern: every turn is one item with its own `document_id`, sent to
`POST /v1/default/banks/{bank}/memories` in requests of 200 items with `async: true` (all
requests sent, then every operation awaited). Import: the same conversations through
`POST .../import` (format locomo). Each path on a stack of its own, one after the other
(neither measures the other's bank or leftover work): embedded PostgreSQL and Temporal dev
server in a fresh home, one worker process (`python -m worker`, as `engram up` runs it), the
HTTP app in process; local extractor, observations off (so consolidation does not compete
with the measured writes), links on. It prints turns/s of both, facts stored, the CPU each
process spent per turn, and the worker's time per activity for each path.

    .venv/bin/python -m bench.retain_throughput [--data PATH] [--conversations 1-10]
                                                [--batch 200] [--paths api,import]
                                                [--home DIR] [--json out.json]

Targets (issue 17): the API pattern >= 100 turns/s; import no slower than before the shared
pipeline (148-161 turns/s on a quiet host, docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractAsyncContextManager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

import httpx
from temporalio.client import Client

from bench.import_locomo import (
    ActivityTime,
    CpuSeconds,
    free_port,
    own_cpu,
    run_import,
    scrape_activity_times,
    tree_cpu,
    wait_for_worker,
)
from bench.locomo_data import load_locomo, parse_selection
from engine.db import create_pool, migrate
from engine.embedding import load_embedder
from engine.settings import Settings
from engram.postgres import EmbeddedPostgres
from engram.temporal_server import TemporalDevServer
from server.app import create_app
from server.services import Services
from worker.main import CPU_THREADS
from workflows.converter import converter_for

DEFAULT_DATA: Final = Path("../shared/data/locomo/locomo10.json")
TARGET_API_TURNS_PER_S: Final = 100.0
POLL_S: Final = 0.5
TIMEOUT_S: Final = 3600.0
CONFIG: Final = {"enable_observations": False}
BANK: Final = "locomo"


@dataclass(frozen=True)
class Phase:
    name: str
    turns: int
    facts: int
    wall_s: float
    turns_per_s: float
    cpu: CpuSeconds
    activities: list[ActivityTime]


def api_requests(raw: list[dict[str, Any]], numbers: list[int], batch: int) -> list[list[Any]]:
    """One item per turn, its own document id, in requests of `batch` items."""
    data = load_locomo_subset(raw, numbers)
    items = [
        {
            "content": turn.content,
            "timestamp": turn.timestamp.isoformat(),
            "context": f"{conversation.sample_id} session {session.number}",
            "document_id": f"{conversation.sample_id}-{turn.dia_id}",
        }
        for conversation in data
        for session in conversation.sessions
        for turn in session.turns
    ]
    return [items[start : start + batch] for start in range(0, len(items), batch)]


def load_locomo_subset(raw: list[dict[str, Any]], numbers: list[int]) -> list[Any]:
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(raw, handle)
    try:
        data = load_locomo(Path(handle.name), check_sha256=False)
    finally:
        os.unlink(handle.name)
    return [c for c in data.conversations if c.number in numbers]


async def run_api(
    requests: list[list[Any]], client: httpx.AsyncClient, out: Any
) -> tuple[float, int]:
    bank = BANK
    response = await client.put(f"/v1/default/banks/{bank}", json=CONFIG)
    if response.status_code != 200:
        raise SystemExit(f"cannot configure the bank: {response.text[:300]}")
    started = time.perf_counter()
    operations = []
    for items in requests:
        response = await client.post(
            f"/v1/default/banks/{bank}/memories", json={"items": items, "async": True}
        )
        if response.status_code != 200:
            raise SystemExit(f"retain refused: {response.status_code} {response.text[:300]}")
        operations.append(response.json()["operation_id"])
    pending = set(operations)
    while pending and time.perf_counter() - started < TIMEOUT_S:
        # One request a round (the bank's operations page), so polling costs the measured
        # stack next to nothing.
        listed = await client.get(f"/v1/default/banks/{bank}/operations", params={"limit": 100})
        for status in listed.json()["operations"]:
            op = status["id"]
            if op in pending and status["status"] in ("completed", "failed", "cancelled"):
                if status["status"] != "completed":
                    raise SystemExit(f"retain {op} ended {status['status']}: {status}")
                pending.discard(op)
        out.write(
            f"\r  {time.perf_counter() - started:6.1f} s  requests done "
            f"{len(operations) - len(pending)}/{len(operations)}   "
        )
        out.flush()
        if pending:
            await asyncio.sleep(POLL_S)
    if pending:
        raise SystemExit("the retains did not finish in time")
    out.write("\n")
    return time.perf_counter() - started, sum(len(r) for r in requests)


async def facts_in(pool: Any, bank: str) -> int:
    async with pool.acquire() as conn:
        return int(
            await conn.fetchval(
                "SELECT count(*) FROM memory_units WHERE bank_id = $1"
                " AND fact_type <> 'observation'",
                bank,
            )
        )


Run = Callable[[httpx.AsyncClient, Any], Awaitable[tuple[float, int]]]


async def run_phase(settings: Settings, run: Run, out: Any) -> tuple[float, int, int]:
    """One path through the HTTP app in process: (wall seconds, turns, facts stored)."""
    embedder = load_embedder("minilm")
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
        async with httpx.AsyncClient(
            transport=transport, base_url="http://bench", timeout=600
        ) as client:
            wall, turns = await run(client, out)
        return wall, turns, await facts_in(pool, BANK)
    finally:
        cpu.shutdown()
        await pool.close()


async def import_phase(content: str, client: httpx.AsyncClient, out: Any) -> tuple[float, int]:
    status, wall = await run_import(client, content, BANK, CONFIG, out)
    if status["status"] != "completed":
        raise SystemExit(f"the import ended {status['status']}: {status['error']}")
    return wall, int(status["items"])


def delta(before: list[ActivityTime], after: list[ActivityTime]) -> list[ActivityTime]:
    earlier = {a.activity: a for a in before}
    changed = [
        ActivityTime(
            a.activity,
            a.attempts - earlier[a.activity].attempts if a.activity in earlier else a.attempts,
            a.seconds - earlier[a.activity].seconds if a.activity in earlier else a.seconds,
        )
        for a in after
    ]
    return sorted((a for a in changed if a.attempts), key=lambda a: -a.seconds)


def bench(
    data: Path, numbers: str, batch: int, paths: set[str], home: Path, out: Any
) -> list[Phase]:
    """Each path on a stack of its own (a fresh database and Temporal server), one after
    the other, so neither measures the other's bank or leftover work."""
    raw = json.loads(data.read_text(encoding="utf-8"))
    chosen = parse_selection(numbers, len(raw))
    subset = [raw[n - 1] for n in chosen]
    requests = api_requests(subset, list(range(1, len(subset) + 1)), batch)
    content = json.dumps(subset)
    phases = [
        (
            "api",
            "retain API",
            f"{len(requests)} requests, one document per turn, async",
            functools.partial(run_api, requests),
        ),
        (
            "import",
            "engram import",
            "the same conversations, one document per conversation",
            functools.partial(import_phase, content),
        ),
    ]
    results = []
    for number, (key, name, what, run) in enumerate(phases):
        if key not in paths:
            continue
        out.write(f"{name}: {what}\n")
        results.append(measure(name, run, home / f"phase{number}", out))
    return results


def measure(name: str, run: Run, home: Path, out: Any) -> Phase:
    home.mkdir(parents=True, exist_ok=True)
    postgres = EmbeddedPostgres(home / "postgres", home / "postgres.log")
    temporal = TemporalDevServer(
        home / "temporal.db", home / "temporal.log", free_port(), free_port(), ui=False
    )
    postgres.start()
    temporal.start()
    metrics_port = free_port()
    worker: subprocess.Popen[bytes] | None = None
    try:
        settings = Settings(
            home=home,
            database_url=postgres.dsn,
            temporal_address=temporal.address,
            task_queue="bench-retain",
            extraction_mode="local",
        )
        env = {
            **os.environ,
            # The same home, so the worker seals payloads with this process's key.
            "ENGRAM_HOME": str(home),
            "ENGRAM_DATABASE_URL": postgres.dsn,
            "ENGRAM_TEMPORAL_ADDRESS": temporal.address,
            "ENGRAM_TASK_QUEUE": settings.task_queue,
            "ENGRAM_WORKER_METRICS_PORT": str(metrics_port),
            "ENGRAM_EXTRACTION_MODE": "local",
        }
        with (home / "worker.log").open("ab") as log:
            worker = subprocess.Popen(
                [sys.executable, "-m", "worker"], env=env, stdout=log, stderr=log
            )
        wait_for_worker(metrics_port, worker)
        assert postgres.process is not None and temporal.process is not None
        pids = {
            "postgres": postgres.process.pid,
            "temporal": temporal.process.pid,
            "worker": worker.pid,
        }
        activities = scrape_activity_times(metrics_port)
        before = {name: tree_cpu(pid) for name, pid in pids.items()}
        own = own_cpu()
        wall, turns, facts = asyncio.run(run_phase(settings, run, out))
        own = own_cpu() - own
        after = {name: tree_cpu(pid) for name, pid in pids.items()}
        cpu = CpuSeconds(
            worker=after["worker"] - before["worker"],
            postgres=after["postgres"] - before["postgres"],
            temporal=after["temporal"] - before["temporal"],
            bench=own,
        )
        return Phase(
            name,
            turns,
            facts,
            wall,
            turns / wall,
            cpu,
            delta(activities, scrape_activity_times(metrics_port)),
        )
    finally:
        if worker is not None and worker.poll() is None:
            worker.kill()
            worker.wait()
        temporal.stop()
        postgres.stop()


def _unused() -> AbstractAsyncContextManager[Services]:
    raise AssertionError("the bench opens the services itself")


def print_report(phases: list[Phase], out: Any) -> None:
    out.write(f"\n{'':16}{'turns':>8}{'facts':>9}{'wall s':>9}{'turns/s':>9}\n")
    for p in phases:
        out.write(f"{p.name:16}{p.turns:8,}{p.facts:9,}{p.wall_s:9.1f}{p.turns_per_s:9.1f}\n")
    out.write("\nCPU seconds per turn (ms), by process\n")
    for p in phases:
        c = p.cpu
        out.write(
            f"{p.name:16} worker {1000 * c.worker / p.turns:5.1f}  postgres"
            f" {1000 * c.postgres / p.turns:5.1f}  temporal {1000 * c.temporal / p.turns:5.1f}"
            f"  app {1000 * c.bench / p.turns:5.1f}  total {1000 * c.total / p.turns:5.1f}\n"
        )
    out.write(f"(targets: retain API >= {TARGET_API_TURNS_PER_S:.0f} turns/s; import no slower")
    out.write(" than 148-161 turns/s, quiet host)\n")
    for p in phases:
        out.write(f"\n{p.name}: worker time by activity (sum over attempts)\n")
        for a in p.activities:
            mean = a.seconds / a.attempts if a.attempts else 0.0
            out.write(f"  {a.activity:<22} {a.seconds:8.1f} s  {a.attempts:6,} x  {mean:7.3f} s\n")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--conversations", default="all", help='e.g. "1-3" (default: all)')
    parser.add_argument("--batch", type=int, default=200, help="items per retain request")
    parser.add_argument(
        "--paths", default="api,import", help="which to measure: api, import or both"
    )
    parser.add_argument("--home", type=Path, help="keep the databases here (default: a temp dir)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    if not args.data.exists():
        print(f"bench: {args.data}: no such file", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="engram-bench-") as scratch:
        home = args.home or Path(scratch)
        paths = set(args.paths.split(","))
        phases = bench(args.data, args.conversations, args.batch, paths, home, sys.stdout)
    print_report(phases, sys.stdout)
    if args.json:
        args.json.write_text(json.dumps([asdict(p) for p in phases], indent=2))
    return 0


if __name__ == "__main__":
    # An explicit exit: the Temporal client's native runtime can abort at interpreter teardown.
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
