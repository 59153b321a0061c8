"""Import throughput with a skewed entity distribution: a journal where a few people appear in
thousands of facts (issue 17: entity resolution serialised such an import).

Self-contained like `bench.import_locomo` (its own embedded PostgreSQL, Temporal dev server and
worker process; the HTTP app in process). It writes a deterministic journal (`jsonl` items:
one document per journal page, 25 sentences each, every sentence naming one or two of
`--people` people drawn with a Zipf-like spread, s = 1.1, and one of 40 places), imports it
through `POST .../import` with the local extractor and prints, every `--every` seconds, facts
stored so far, facts/s over the interval and the mean `resolve_entities` time per document
over the interval (from the worker's `engram_activity_duration_seconds`).

`--observations` keeps consolidation on: after the import it waits until the consolidation
backlog (facts not yet consolidated) is empty and prints consolidated facts/s over time,
next to the import's facts/s (through the workflow: one run, batches of 64, as deployed).

`--consolidate` runs the import with observations off, then consolidates the whole backlog in
process (`consolidate_local_batch`, batches of 64, as the activity runs them) in the same run,
printing consolidated facts/s over time and, at the end, the import's and consolidation's
facts/s side by side: on a shared host the ratio within one run is the figure.

`--consolidate-only --home DIR` reuses the database a run kept with `--home DIR`: it removes
the bank's observations, puts every fact back on the backlog and runs the local path's
batches (`consolidate_local_batch`, as the activity does) in process until the backlog is
empty, printing facts/s over time: the consolidation speed without Temporal or the import.

    .venv/bin/python -m bench.entity_skew                 # 400 documents x 25 sentences
    .venv/bin/python -m bench.entity_skew --full          # 4,000 documents (100,000 sentences)
    .venv/bin/python -m bench.entity_skew --observations  # then time consolidation
    .venv/bin/python -m bench.entity_skew --consolidate --pg-stats  # import, then the backlog
    .venv/bin/python -m bench.entity_skew --home DIR && \
        .venv/bin/python -m bench.entity_skew --consolidate-only --home DIR
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final, TextIO

import httpx
from temporalio.client import Client

from bench.import_locomo import (
    NO_LINKS,
    PG_STATS_OPTIONS,
    _unused,
    free_port,
    reset_statements,
    scrape_activity_times,
    top_statements,
    tree_cpu,
    wait_for_worker,
)
from bench.skew_consolidation import BACKLOG, consolidate_in_process
from bench.synthetic_words import CITIES, FIRST, LAST
from engine.db import Pool, create_pool, migrate
from engine.embedding import load_embedder
from engine.settings import Settings
from engram.postgres import EmbeddedPostgres
from engram.temporal_server import TemporalDevServer
from server.app import create_app
from server.services import Services
from worker.main import CPU_THREADS
from workflows.converter import converter_for

SEED: Final = 17
ZIPF_S: Final = 1.1
SENTENCES_PER_DOCUMENT: Final = 25
DEFAULT_DOCUMENTS: Final = 400
FULL_DOCUMENTS: Final = 4000
DEFAULT_PEOPLE: Final = 3000
START: Final = datetime(2021, 1, 4, 8, tzinfo=UTC)
POLL_S: Final = 1.0
TIMEOUT_S: Final = 4 * 3600.0
BANK: Final = "journal"

ALONE: Final = (
    "{a} repaired the fence behind the house.",
    "{a} finished reading a long novel about sailors.",
    "{a} started training for the autumn half marathon.",
    "{a} planted tomatoes and basil in {place}.",
    "{a} complained about the noise from the building site.",
    "{a} bought a second-hand cello in {place}.",
    "{a} spent the evening sorting old photographs.",
)
TOGETHER: Final = (
    "{a} had coffee with {b} in {place}.",
    "{a} helped {b} move boxes into the new flat.",
    "{a} argued with {b} about the budget for the trip.",
    "{a} went hiking with {b} near {place}.",
    "{a} cooked dinner for {b} and talked about work.",
    "{a} lent {b} a bicycle for the week.",
    "{a} and {b} watched the football match in {place}.",
    "{a} called {b} to talk about the garden.",
)


@dataclass(frozen=True)
class Sample:
    """One progress line: cumulative figures at `seconds` after the start."""

    seconds: float
    documents: int
    facts: int
    resolve_s: float
    resolve_calls: int


def people(count: int, rng: random.Random) -> list[str]:
    names = sorted({f"{rng.choice(FIRST)} {rng.choice(LAST)}" for _ in range(count * 3)})
    rng.shuffle(names)
    if len(names) < count:
        raise SystemExit(f"only {len(names)} distinct names for {count} people")
    return names[:count]


def zipf_rank(rng: random.Random, n: int, s: float = ZIPF_S) -> int:
    """A rank in [0, n) with probability ~ 1 / (rank + 1)^s (continuous inverse CDF)."""
    top = (n + 1) ** (1 - s) - 1
    return min(max(int((rng.random() * top + 1) ** (1 / (1 - s))) - 1, 0), n - 1)


def journal(documents: int, population: int, seed: int = SEED) -> tuple[str, Counter[str]]:
    """The journal as JSON Lines items, and how many sentences name each person."""
    rng = random.Random(seed)
    names = people(population, rng)
    places = list(CITIES[:40])
    counts: Counter[str] = Counter()
    lines: list[str] = []
    for doc in range(documents):
        sentences: list[str] = []
        for _ in range(SENTENCES_PER_DOCUMENT):
            a = names[zipf_rank(rng, population)]
            place = places[zipf_rank(rng, len(places), 0.9)]
            if rng.random() < 0.6:
                b = names[zipf_rank(rng, population)]
                while b == a:
                    b = names[rng.randrange(population)]
                sentences.append(rng.choice(TOGETHER).format(a=a, b=b, place=place))
                counts.update((a, b))
            else:
                sentences.append(rng.choice(ALONE).format(a=a, place=place))
                counts[a] += 1
        at = START + timedelta(hours=9 * doc)
        record = {
            "document_id": f"journal-{doc:05d}",
            "content": " ".join(sentences),
            "timestamp": at.isoformat(),
        }
        lines.append(json.dumps(record))
    return "\n".join(lines) + "\n", counts


def resolve_totals(metrics_port: int) -> tuple[float, int]:
    for activity in scrape_activity_times(metrics_port):
        if activity.activity == "resolve_entities":
            return activity.seconds, activity.attempts
    return 0.0, 0


async def run_import(
    client: httpx.AsyncClient, content: str, metrics_port: int, every: float, out: TextIO
) -> tuple[list[Sample], dict[str, Any]]:
    response = await client.post(
        f"/v1/default/banks/{BANK}/import",
        json={"content": content, "name": "journal.jsonl", "format": "jsonl"},
    )
    if response.status_code != 202:
        raise SystemExit(f"import refused: {response.status_code} {response.text[:300]}")
    operation_id = response.json()["operation_id"]
    started = time.perf_counter()
    samples = [Sample(0.0, 0, 0, 0.0, 0)]
    out.write(
        "   time  documents     facts  facts/s (interval)  resolve s/document (interval)  load\n"
    )
    while time.perf_counter() - started < TIMEOUT_S:
        await asyncio.sleep(POLL_S)
        status: dict[str, Any] = (await client.get(f"/v1/default/imports/{operation_id}")).json()
        done = status["status"] in ("completed", "failed", "cancelled")
        elapsed = time.perf_counter() - started
        if not done and elapsed - samples[-1].seconds < every:
            continue
        progress = status["progress"]
        resolve_s, calls = resolve_totals(metrics_port)
        sample = Sample(
            elapsed,
            int(progress.get("documents_done", 0)),
            int(progress.get("facts_added", 0)),
            resolve_s,
            calls,
        )
        last = samples[-1]
        rate = (sample.facts - last.facts) / max(sample.seconds - last.seconds, 1e-9)
        # resolve_entities takes a batch of documents: its time per document
        per_doc = (sample.resolve_s - last.resolve_s) / max(sample.documents - last.documents, 1)
        out.write(
            f"{sample.seconds:7.0f}  {sample.documents:9,}  {sample.facts:8,}"
            f"  {rate:18.1f}  {per_doc:29.3f}  {os.getloadavg()[0]:4.1f}\n"
        )
        out.flush()
        samples.append(sample)
        if done:
            return samples, status
    raise SystemExit("the import did not finish in time")


async def wait_for_consolidation(pool: Pool, every: float, out: TextIO) -> tuple[int, float]:
    """Poll the backlog until it is empty: (facts consolidated, seconds)."""
    first = int(await pool.fetchval(BACKLOG, BANK))
    out.write(f"\nconsolidation backlog {first:,} facts\n   time   backlog  facts/s (interval)\n")
    started = time.perf_counter()
    last_t, last_n = 0.0, first
    while time.perf_counter() - started < TIMEOUT_S:
        await asyncio.sleep(every)
        backlog = int(await pool.fetchval(BACKLOG, BANK))
        now = time.perf_counter() - started
        out.write(f"{now:7.0f}  {backlog:8,}  {(last_n - backlog) / (now - last_t):18.1f}\n")
        out.flush()
        last_t, last_n = now, backlog
        if backlog == 0:
            return first, now
    raise SystemExit("consolidation did not finish in time")


async def drive(
    settings: Settings,
    content: str,
    metrics_port: int,
    args: argparse.Namespace,
    out: TextIO,
    stop_worker: Callable[[], None],
) -> None:
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
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
            config: dict[str, bool] = dict(NO_LINKS) if args.no_links else {}
            config["enable_observations"] = args.observations
            response = await client.put(f"/v1/default/banks/{BANK}", json=config)
            if response.status_code != 200:
                raise SystemExit(f"cannot configure the bank: {response.text[:300]}")
            samples, status = await run_import(client, content, metrics_port, args.every, out)
        if status["status"] != "completed":
            raise SystemExit(f"the import ended {status['status']}: {status.get('error')}")
        end = samples[-1]
        entities = int(
            await pool.fetchval("SELECT count(*) FROM entities WHERE bank_id = $1", BANK)
        )
        out.write(
            f"\nimport: {end.documents:,} documents, {end.facts:,} facts in {end.seconds:.0f} s"
            f" = {end.facts / end.seconds:.1f} facts/s; {entities:,} entities;"
            f" resolve_entities {end.resolve_s / max(end.documents, 1):.3f} s/document"
            f" ({end.resolve_calls:,} calls, {end.resolve_s:.0f} s in all)\n"
        )
        out.write("worker time by activity (sums over attempts; they overlap):\n")
        for a in scrape_activity_times(metrics_port):
            mean = a.seconds / a.attempts if a.attempts else 0.0
            out.write(f"  {a.activity:<26} {a.seconds:8.1f} s  {a.attempts:6,} x  {mean:7.3f} s\n")
        if args.observations:
            consolidated, seconds = await wait_for_consolidation(pool, args.every, out)
            out.write(
                f"consolidation: {consolidated:,} facts in {seconds:.0f} s after the import"
                f" = {consolidated / max(seconds, 1e-9):.1f} facts/s"
                f" (import {end.facts / end.seconds:.1f} facts/s)\n"
            )
        if args.consolidate:
            # The worker would consolidate the bank too (the import asks for it when it ends,
            # and the bench turns observations on): only the in-process batches run.
            stop_worker()
            out.write("\n")
            if args.pg_stats:
                await reset_statements(settings.database_url)
            consolidated, seconds = await consolidate_in_process(
                settings.database_url, BANK, args.every, None, out
            )
            imported, consolidating = end.facts / end.seconds, consolidated / seconds
            out.write(
                f"\nimport {imported:.1f} facts/s, consolidation {consolidating:.1f} facts/s:"
                f" consolidation / import = {consolidating / imported:.2f}\n"
            )
            if args.pg_stats:
                await print_statements(settings.database_url, out)
    finally:
        cpu.shutdown()
        await pool.close()


async def print_statements(dsn: str, out: TextIO) -> None:
    out.write("\nPostgreSQL statements by execution time (pg_stat_statements):\n")
    for st in await top_statements(dsn):
        out.write(f"  {st.seconds:7.2f} s  {st.calls:7,} x  {st.query[:150]}\n")


def consolidate_only(args: argparse.Namespace, home: Path, out: TextIO) -> None:
    options = PG_STATS_OPTIONS if args.pg_stats else ()
    postgres = EmbeddedPostgres(home / "postgres", home / "postgres.log", options)
    postgres.start()
    try:
        if args.pg_stats:
            asyncio.run(reset_statements(postgres.dsn))
        asyncio.run(consolidate_in_process(postgres.dsn, BANK, args.every, args.budget_s, out))
        if args.pg_stats:
            asyncio.run(print_statements(postgres.dsn, out))
    finally:
        postgres.stop()


def stop(worker: subprocess.Popen[bytes]) -> None:
    if worker.poll() is None:
        worker.terminate()
        try:
            worker.wait(30)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()


def bench(args: argparse.Namespace, home: Path, out: TextIO) -> None:
    documents = FULL_DOCUMENTS if args.full else args.documents
    content, counts = journal(documents, args.people)
    top = counts.most_common(3)
    out.write(
        f"journal: {documents:,} documents x {SENTENCES_PER_DOCUMENT} sentences,"
        f" {len(counts):,} people named; most named: "
        + ", ".join(f"{name} {n:,}" for name, n in top)
        + f"; median {sorted(counts.values())[len(counts) // 2]}\n"
    )
    options = PG_STATS_OPTIONS if args.pg_stats else ()
    postgres = EmbeddedPostgres(home / "postgres", home / "postgres.log", options)
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
            task_queue="bench-entity-skew",
            extraction_mode="local",
        )
        env = {
            **os.environ,
            "ENGRAM_HOME": str(home),  # the payload key the app and the worker share
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
        assert postgres.process is not None
        before = tree_cpu(postgres.process.pid), tree_cpu(worker.pid)
        running = worker

        def stop_worker() -> None:
            before_stop.append(tree_cpu(running.pid))
            stop(running)

        before_stop: list[float] = []
        asyncio.run(drive(settings, content, metrics_port, args, out, stop_worker))
        after = tree_cpu(postgres.process.pid), (before_stop or [tree_cpu(worker.pid)])[0]
        out.write(
            f"CPU seconds: postgres {after[0] - before[0]:.0f}, worker {after[1] - before[1]:.0f}\n"
        )
    finally:
        if worker is not None:
            stop(worker)
        temporal.stop()
        postgres.stop()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--documents", type=int, default=DEFAULT_DOCUMENTS)
    parser.add_argument("--full", action="store_true", help=f"{FULL_DOCUMENTS:,} documents")
    parser.add_argument("--people", type=int, default=DEFAULT_PEOPLE)
    parser.add_argument("--every", type=float, default=20.0, help="seconds between lines")
    parser.add_argument("--no-links", action="store_true", help="turn the bank's links off")
    parser.add_argument("--observations", action="store_true", help="then time consolidation")
    parser.add_argument(
        "--consolidate-only", action="store_true", help="time the local path on a kept --home"
    )
    parser.add_argument(
        "--consolidate",
        action="store_true",
        help="import with observations off, then consolidate the whole backlog in process",
    )
    parser.add_argument(
        "--pg-stats", action="store_true", help="statement times of the consolidation"
    )
    parser.add_argument(
        "--budget-s", type=float, help="with --consolidate-only: stop after this many seconds"
    )
    parser.add_argument("--home", type=Path, help="keep the databases here (default: temp dir)")
    args = parser.parse_args(argv)
    # A terminated bench still stops its worker, Temporal and PostgreSQL (`finally` below).
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    if args.consolidate and args.observations:
        parser.error("--consolidate imports with observations off: not with --observations")
    if args.consolidate_only:
        if args.home is None:
            parser.error("--consolidate-only needs the --home of an earlier run")
        consolidate_only(args, args.home, sys.stdout)
        return 0
    if args.home is not None:
        args.home.mkdir(parents=True, exist_ok=True)
        bench(args, args.home, sys.stdout)
        return 0
    with tempfile.TemporaryDirectory(prefix="engram-entity-skew-") as tmp:
        bench(args, Path(tmp), sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
