"""A database of a million facts: one large bank beside many banks of realistic sizes, then
recall latency in the large bank and in a small bank next to it.

    nice -n 10 .venv/bin/python -m bench.recall_million --data-dir /tmp/million   # build, measure
    .venv/bin/python -m bench.recall_million --data-dir /tmp/million --no-build   # measure only

Building: the same retain steps as bench/recall_latency.py (stage → embed → entities → link →
upsert, one document of 25 facts at a time, `--builders` documents in flight), with one
shortcut more. Embedding a million texts with MiniLM on this machine would take ~1-3 hours
of CPU alone, so the facts' vectors come from a pool: the first `--pool` facts of the large
bank are embedded for real once (cached in the data directory), and every fact takes the
sentence and token vectors of the pool entry its text hashes to, the sentence vector
perturbed by Gaussian noise (σ = 0.02 per dimension, cosine ~0.93 with the entry) and
normalised again. Texts, dates, entities, BM25 terms and links are each fact's own; the
semantic neighbourhoods are those of a corpus of near-duplicates (each pool entry's copies),
which is harder on HNSW than real text, not easier. The query side is embedded for real.

Banks: the large bank (`--large` facts, default 500k) and small banks whose sizes follow a
log-normal law (median ~400 facts, a few of several thousand) until the database holds
`--total` facts. Documents are stored interleaved (each bank's k-th document at the same
fraction of the build), so a build stopped half-way is a database of half the size with the
same mixture; re-running continues where it stopped (stored documents are skipped).

Printed: build rate of this sitting, database size and bytes per fact (per table and index),
PostgreSQL's shared buffers and this process's resident memory, then recall latency (one
client, budget mid, all four arms) in the large bank and in a small bank of ~1,000 facts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import resource
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

# Before numpy/onnxruntime load: one BLAS thread per process (see engram/supervisor.py).
for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import httpx  # noqa: E402
import numpy as np  # noqa: E402
from numpy.typing import NDArray  # noqa: E402

from bench.bulk_indexes import drop_indexes, restore_indexes  # noqa: E402
from bench.bulk_load import PoolVectors, load_bank, loader_connection  # noqa: E402
from bench.in_process import lazy_temporal, never, percentile, read_graph  # noqa: E402
from bench.pooled_vectors import load_pool  # noqa: E402
from bench.recall_latency import (  # noqa: E402
    CHUNKS_PER_DOCUMENT,
    DAYS,
    FACTS_PER_CHUNK,
    START,
    arms_fired,
    measure,
    server_timings,
    store_document,
)
from bench.synthetic_facts import (  # noqa: E402
    SyntheticFact,
    Vocabulary,
    generate_facts,
    generate_queries,
)
from engine.db import Pool, create_pool, migrate  # noqa: E402
from engine.embedding import Embedder, load_embedder  # noqa: E402
from engine.recall.semantic import SCAN_SESSION  # noqa: E402
from engine.retain.gate import OrderedGate  # noqa: E402
from engine.settings import Settings  # noqa: E402
from engine.store.banks import ensure_bank  # noqa: E402
from engram.postgres import EmbeddedPostgres  # noqa: E402
from server.app import create_app  # noqa: E402
from server.services import CPU_THREADS, Services  # noqa: E402

FloatMatrix = NDArray[np.float32]

LARGE: Final = "million-large"
SEED: Final = 20261201
DOCUMENT: Final = FACTS_PER_CHUNK * CHUNKS_PER_DOCUMENT
SMALL_MEDIAN: Final = 400
SMALL_SIGMA: Final = 1.2  # log-normal: ~5% of banks above 3,000 facts
SMALL_MAX: Final = 20_000
PROBE_SIZE: Final = 1_000  # the small bank measured is the first of about this size


@dataclass(frozen=True)
class BankPlan:
    bank: str
    facts: int
    seed: int


def plan_banks(total: int, large: int) -> list[BankPlan]:
    """The large bank, then small banks of log-normal sizes until `total` facts."""
    rng = random.Random(SEED)
    plans = [BankPlan(LARGE, large, SEED)]
    left = total - large
    n = 0
    while left > 0:
        size = int(
            min(SMALL_MAX, max(DOCUMENT, rng.lognormvariate(np.log(SMALL_MEDIAN), SMALL_SIGMA)))
        )
        size = min(left, size - size % DOCUMENT) or left
        plans.append(BankPlan(f"million-{n:05d}", size, SEED + 1 + n))
        left -= size
        n += 1
    return plans


def bank_facts(plan: BankPlan) -> list[SyntheticFact]:
    return generate_facts(plan.facts, seed=plan.seed, start=START, days=DAYS)[0]


def build_order(plans: list[BankPlan]) -> list[tuple[float, str, int]]:
    """(fraction of the build, bank, document index): each bank's documents spread evenly."""
    order: list[tuple[float, str, int]] = []
    for plan in plans:
        documents = -(-plan.facts // DOCUMENT)
        order += [((i + 0.5) / documents, plan.bank, i) for i in range(documents)]
    order.sort()
    return order


@dataclass
class BuildFigures:
    documents_stored: int = 0
    facts_stored: int = 0
    seconds: float = 0.0
    facts_per_second: float = 0.0


async def build(
    pool: Pool,
    embedder: Embedder,
    cpu: ThreadPoolExecutor,
    plans: list[BankPlan],
    builders: int,
    stop_after: float,
) -> BuildFigures:
    async with pool.acquire() as conn:
        stored = {
            (r["bank_id"], r["document_id"])
            for r in await conn.fetch(
                "SELECT bank_id, document_id FROM documents WHERE bank_id LIKE 'million-%'"
            )
        }
        for plan in plans:
            await ensure_bank(conn, plan.bank)
    todo = [
        (bank, index)
        for _, bank, index in build_order(plans)
        if (bank, f"doc-{index:06d}") not in stored
    ]
    figures = BuildFigures()
    if not todo:
        return figures
    print(f"building: {len(todo):,} documents to store ({len(stored):,} stored)", flush=True)
    by_bank = {p.bank: p for p in plans}
    facts: dict[str, list[SyntheticFact]] = {}
    started = time.perf_counter()
    gate = OrderedGate(builders)
    queue: asyncio.Queue[tuple[str, int]] = asyncio.Queue()
    for item in todo:
        queue.put_nowait(item)

    async def builder() -> None:
        while not queue.empty() and time.perf_counter() - started < stop_after:
            bank, index = queue.get_nowait()
            if bank not in facts:
                facts[bank] = bank_facts(by_bank[bank])
            part = facts[bank][index * DOCUMENT : (index + 1) * DOCUMENT]
            await store_document(pool, embedder, cpu, gate, bank, f"doc-{index:06d}", part)
            figures.documents_stored += 1
            figures.facts_stored += len(part)
            if figures.documents_stored % 500 == 0:
                elapsed = time.perf_counter() - started
                print(
                    f"  {figures.documents_stored:,}/{len(todo):,} documents, "
                    f"{figures.facts_stored / elapsed:.0f} facts/s",
                    flush=True,
                )

    await asyncio.gather(*(builder() for _ in range(builders)))
    figures.seconds = round(time.perf_counter() - started, 1)
    figures.facts_per_second = round(figures.facts_stored / figures.seconds, 1)
    async with pool.acquire() as conn:
        await conn.execute("DELETE FROM staged_facts WHERE bank_id LIKE 'million-%'")
        await conn.execute("VACUUM ANALYZE")
    return figures


@dataclass
class BulkFigures:
    """The bulk loader's figures: a loader's rate, not Engram's write rate."""

    facts_stored: int = 0
    load_seconds: float = 0.0
    index_seconds: dict[str, float] = field(default_factory=dict)
    vacuum_seconds: float = 0.0
    total_seconds: float = 0.0
    facts_per_second: float = 0.0


async def bulk_build(
    pool: Pool,
    database_url: str,
    vectors: PoolVectors,
    plans: list[BankPlan],
    data_dir: Path,
    memory: str,
    stop_after: float,
) -> BulkFigures:
    """bench/bulk_load.py: the banks of the plan in order (the large one first) until
    `stop_after` seconds have passed, then the dropped keys and indexes rebuilt, then VACUUM
    ANALYZE. A run stopped early leaves a consistent, smaller database; the next run
    continues it."""
    async with pool.acquire() as conn:
        for plan in plans:
            await ensure_bank(conn, plan.bank)
        await drop_indexes(conn, data_dir / "bulk-dropped.json")
    figures = BulkFigures()
    started = time.perf_counter()
    loader = await loader_connection(database_url)
    stop_at = started + stop_after
    for number, plan in enumerate(plans):
        if time.perf_counter() > stop_at:
            break
        figures.facts_stored += await load_bank(
            loader, vectors, plan.bank, bank_facts(plan), DOCUMENT, stop_at
        )
        if number % 50 == 0 or plan.bank == LARGE:
            elapsed = time.perf_counter() - started
            print(
                f"  {number + 1:,}/{len(plans):,} banks, {figures.facts_stored:,} facts loaded "
                f"in this sitting, {elapsed:.0f}s",
                flush=True,
            )
    figures.load_seconds = round(time.perf_counter() - started, 1)
    # On the loader's connection: the pool's have a 60 s statement timeout.
    figures.index_seconds = await restore_indexes(loader, data_dir / "bulk-dropped.json", memory)
    vacuumed = time.perf_counter()
    await loader.execute("VACUUM ANALYZE")
    figures.vacuum_seconds = round(time.perf_counter() - vacuumed, 1)
    await loader.close()
    figures.total_seconds = round(time.perf_counter() - started, 1)
    figures.facts_per_second = round(figures.facts_stored / max(figures.total_seconds, 1e-9), 1)
    return figures


_SIZES = """
SELECT c.relname AS name, pg_total_relation_size(c.oid) AS bytes
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'public' AND c.relkind IN ('r', 'i', 'm')
ORDER BY pg_total_relation_size(c.oid) DESC LIMIT 16
"""


async def storage(pool: Pool) -> dict[str, Any]:
    """Database size, bytes per fact, the largest tables and indexes (a table's figure
    includes its indexes and TOAST; its indexes are listed again on their own)."""
    async with pool.acquire() as conn:
        facts = int(await conn.fetchval("SELECT count(*) FROM memory_units"))
        banks = int(await conn.fetchval("SELECT count(*) FROM banks"))
        total = int(await conn.fetchval("SELECT pg_database_size(current_database())"))
        buffers = await conn.fetchval("SHOW shared_buffers")
        largest = {r["name"]: int(r["bytes"]) for r in await conn.fetch(_SIZES)}
    per = max(facts, 1)
    # Retain's staging table holds only in-flight rows; what it occupies on disk after a
    # build is dead rows' space, reused by the next retains.
    staged = largest.get("staged_facts", 0)
    return {
        "facts": facts,
        "banks": banks,
        "database_bytes": total,
        "bytes_per_fact": round(total / per),
        "gb_per_million_facts": round(total / per * 1e6 / 1e9, 2),
        "bytes_per_fact_without_staging": round((total - staged) / per),
        "shared_buffers": buffers,
        "bytes_per_fact_by_relation": {k: round(v / per) for k, v in largest.items()},
    }


@dataclass
class Latency:
    bank: str
    facts: int
    recalls: int
    errors: int
    p50_ms: float
    p95_ms: float
    p99_ms: float
    mean_ms: float
    arms_fired: dict[str, int] = field(default_factory=dict)
    server_ms: dict[str, float] = field(default_factory=dict)


async def latency(
    client: httpx.AsyncClient, pool: Pool, plan: BankPlan, queries: int, warmup: int
) -> Latency:
    async with pool.acquire() as conn:
        stored = int(
            await conn.fetchval("SELECT count(*) FROM memory_units WHERE bank_id = $1", plan.bank)
        )
    vocab = Vocabulary(random.Random(plan.seed))
    # A partly built bank covers its whole span thinly (documents are interleaved by date).
    asked = generate_queries(queries + warmup, vocab, seed=plan.seed, start=START, days=DAYS)
    fired = await arms_fired(client, asked[: min(30, warmup)], plan.bank)
    await measure(client, asked[:warmup], 1, plan.bank)
    timed, errors, _ = await measure(client, asked[warmup:], 1, plan.bank)
    ordered = sorted(timed)
    return Latency(
        bank=plan.bank,
        facts=stored,
        recalls=len(timed),
        errors=errors,
        p50_ms=round(percentile(ordered, 0.5), 1),
        p95_ms=round(percentile(ordered, 0.95), 1),
        p99_ms=round(percentile(ordered, 0.99), 1),
        mean_ms=round(statistics.fmean(ordered), 1) if ordered else 0.0,
        arms_fired=dict(fired),
        server_ms=await server_timings(client, asked[warmup : warmup + 50], plan.bank),
    )


async def run(args: argparse.Namespace, database_url: str) -> dict[str, Any]:
    real = load_embedder("minilm")
    await migrate(database_url, real.dimension, real.space)
    pool = await create_pool(database_url, max_size=args.pool)
    # Recall's, opened as the server opens its own (server/services.py: recall's scan settings).
    serving = await create_pool(database_url, max_size=args.pool, settings=SCAN_SESSION)
    cpu = ThreadPoolExecutor(CPU_THREADS, thread_name_prefix="bench-cpu")
    out: dict[str, Any] = {}
    try:
        plans = plan_banks(args.total, args.large)
        print(
            f"{len(plans):,} banks planned: {args.large:,} facts in {LARGE}, {args.total:,} in all"
        )
        if not args.no_build:
            pool_texts = [f.fact.text for f in bank_facts(BankPlan(LARGE, args.pool_size, SEED))]
            pooled = load_pool(real, pool_texts, Path(args.data_dir) / f"pool-{args.pool_size}.npz")
            if args.bulk:
                out["build"] = asdict(
                    await bulk_build(
                        pool,
                        database_url,
                        pooled.for_loader(),
                        plans,
                        Path(args.data_dir),
                        args.index_memory,
                        args.build_seconds,
                    )
                )
            else:
                out["build"] = asdict(
                    await build(pool, pooled, cpu, plans, args.builders, args.build_seconds)
                )
            print("build:", out["build"], flush=True)
        out["storage"] = await storage(pool)
        out["bench_process_max_rss_mb"] = round(
            resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        )
        print(json.dumps(out["storage"], indent=1), flush=True)
        settings = Settings(
            home=Path(args.data_dir),
            database_url=database_url,
            recall_graph_cache_mb=args.graph_cache_mb,
        )
        services = Services(
            settings,
            serving,
            await lazy_temporal(),
            real,
            cpu,
            graph_cache=args.graph_cache_mb > 0,
            scan_session=True,
        )
        app = create_app(never)
        app.state.services = services
        probe = next((p for p in plans[1:] if PROBE_SIZE <= p.facts <= 2 * PROBE_SIZE), plans[1])
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://engram.bench", timeout=60
        ) as client:
            out["latency"] = []
            for plan in (plans[0], probe):
                await read_graph(services, plan.bank)  # as a server would after a first recall
                out["latency"].append(
                    asdict(await latency(client, pool, plan, args.queries, args.warmup))
                )
    finally:
        cpu.shutdown(wait=False, cancel_futures=True)
        await pool.close()
        await serving.close()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--total", type=int, default=1_000_000, help="facts in the database")
    parser.add_argument("--large", type=int, default=500_000, help="facts in the large bank")
    parser.add_argument("--pool-size", type=int, default=5_000, help="facts embedded for real")
    parser.add_argument("--builders", type=int, default=4, help="documents in flight")
    parser.add_argument(
        "--build-seconds", type=float, default=float("inf"), help="stop building after this"
    )
    parser.add_argument("--no-build", action="store_true", help="measure the database as it is")
    parser.add_argument(
        "--bulk", action="store_true", help="build with bench/bulk_load.py (COPY), not retain"
    )
    parser.add_argument(
        "--index-memory", default="4GB", help="maintenance_work_mem for the index rebuilds"
    )
    parser.add_argument("--queries", type=int, default=200, help="timed recalls per bank")
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--pool", type=int, default=10, help="connection pool size")
    parser.add_argument(
        "--graph-cache-mb",
        type=int,
        default=Settings(home=Path()).recall_graph_cache_mb,
        help="the server's bank graphs in memory (ENGRAM_RECALL_GRAPH_CACHE_MB); 0: off",
    )
    parser.add_argument("--data-dir", required=True, help="the embedded PostgreSQL's home")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    root = Path(args.data_dir)
    root.mkdir(parents=True, exist_ok=True)
    postgres = EmbeddedPostgres(root / "pg", root / "postgres.log")
    postgres.start()
    try:
        database_url = postgres.create_database("recall_million")
        figures = asyncio.run(run(args, database_url))
    finally:
        postgres.stop()
    for row in figures["latency"]:
        print(
            f"{row['bank']} ({row['facts']:,} facts): p50 {row['p50_ms']} ms · p95 "
            f"{row['p95_ms']} ms · p99 {row['p99_ms']} ms · errors {row['errors']}\n"
            f"  server medians (ms): {row['server_ms']}"
        )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
