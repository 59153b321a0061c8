"""Where one recall's time goes: every statement it sends, timed, and their plans.

Runs the recall engine in process (no HTTP) against a bank built by bench/recall_latency.py,
one recall at a time, with asyncpg's query logger on every pooled connection. Prints the CPU
one recall costs (this process, its event loop, and PostgreSQL when it runs on this machine),
the trace's stage and arm medians, then each distinct statement's count per recall and its
median / p95 time as the client saw it; with `--explain`, writes `EXPLAIN (ANALYZE, BUFFERS)`
of every statement of the first recall to a file (the semantic and temporal arms' SET LOCAL
settings applied first, as the arms do).

    .venv/bin/python -m bench.recall_profile --database-url postgresql://... --queries 50 \
        --explain /tmp/plans.txt
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import asyncpg  # noqa: E402
from asyncpg.connection import LoggedQuery  # noqa: E402

from bench.in_process import bench_database, percentile  # noqa: E402
from bench.recall_latency import BANK, DAYS, SEED, START  # noqa: E402
from bench.synthetic_facts import generate_facts, generate_queries  # noqa: E402
from engine.db import create_pool  # noqa: E402
from engine.embedding import load_embedder  # noqa: E402
from engine.recall.engine import RecallEngine  # noqa: E402
from engine.recall.semantic import SCAN_SESSION  # noqa: E402
from engine.recall.types import RecallRequest  # noqa: E402
from engine.settings import Settings  # noqa: E402
from server.services import CPU_THREADS  # noqa: E402

SETTINGS_PREFIX: Final = "SELECT set_config('hnsw."


@dataclass
class Statements:
    """The statements logged since the last `take`, in the order they finished."""

    logged: list[LoggedQuery] = field(default_factory=list)
    active: bool = False

    def log(self, record: LoggedQuery) -> None:
        if self.active:
            self.logged.append(record)

    def take(self) -> list[LoggedQuery]:
        taken, self.logged = self.logged, []
        return taken


# A statement's name, by a phrase only it contains (first match wins).
NAMES: Final = (
    ("'entity_named' AS kind", "graph: named entities"),
    ("'entity_shared' AS kind", "graph: shared entities"),
    ("'term_shared' AS kind", "graph: shared terms"),
    ("l.link_type AS kind", "graph: hop (links, shared entities and terms)"),
    ("FROM bank_changes", "graph: is the cached graph exact (engine/recall/graph_cache.py)"),
    ("WITH c AS MATERIALIZED", "fetch: context neighbours"),
    ("token_vectors FROM memory_units", "fetch: token vectors"),
    ("CROSS JOIN LATERAL (\n    SELECT coalesce(array_agg(e.canonical_name", "fetch: rows"),
    ("WITH inside AS MATERIALIZED", "temporal: exact window"),
    ("AND ((m.occurred_start IS NOT NULL", "temporal: HNSW window"),
    ("WITH seeds AS", "temporal: spread"),
    ("screen AS (", "keyword: screened BM25"),
    ("JOIN memory_terms mt ON mt.bank_id = $1 AND mt.term = q.term\nJOIN", "keyword: BM25"),
    ("SELECT term, df FROM bank_term_stats", "keyword: df"),
    ("WITH hits AS MATERIALIZED", "semantic: HNSW"),
    ("SELECT set_config('hnsw.", "hnsw settings"),
)


@dataclass(frozen=True)
class CpuClock:
    """CPU seconds so far: this process, its event-loop thread, and the PostgreSQL server
    (postmaster, live backends, and the backends it has reaped), read from /proc. The server
    is found through a backend's parent, so it must run on this machine (else None)."""

    process: float
    loop: float
    postgres: float | None

    @staticmethod
    def ticks(stat: str, fields: slice) -> int:
        # Fields after the command name (which may hold spaces): state is field 3.
        values = stat.rsplit(")", 1)[1].split()
        return sum(int(v) for v in values[fields])

    @classmethod
    def postgres_seconds(cls, postmaster: int | None) -> float | None:
        return None if postmaster is None else cls.tree_seconds(postmaster)

    @classmethod
    def tree_seconds(cls, root: int) -> float | None:
        """CPU seconds of a process, the children it has reaped and its live children (a
        postmaster and its backends, or the server's parent and the processes it spawned);
        None when it is not running here."""
        hz = os.sysconf("SC_CLK_TCK")
        try:
            # utime, stime, cutime, cstime: fields 14-17, i.e. 11-14 after the name.
            total = cls.ticks(Path(f"/proc/{root}/stat").read_text(), slice(11, 15))
        except OSError:
            return None
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == root:
                total += cls.ticks(stat, slice(11, 13))
        return total / hz

    @classmethod
    def now(cls, postmaster: int | None) -> CpuClock:
        return cls(time.process_time(), time.thread_time(), cls.postgres_seconds(postmaster))


def parent_of(backend: int) -> int | None:
    """The PostgreSQL server's pid (a backend's parent) when it runs here, else None."""
    try:
        stat = Path(f"/proc/{backend}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])


def label(sql: str) -> str:
    """A statement's short name (NAMES), else its first words."""
    for phrase, name in NAMES:
        if phrase in sql:
            return name
    return " ".join(sql.split())[:60]


async def explain(pool: asyncpg.Pool, statements: list[LoggedQuery], generic: bool) -> str:
    """With `generic`, the plans PostgreSQL falls back to for a prepared statement after five
    runs (plan_cache_mode = force_generic_plan): asyncpg prepares every statement."""
    out: list[str] = []
    settings: LoggedQuery | None = None
    for record in statements:
        if record.query.startswith(SETTINGS_PREFIX):
            settings = record
            continue
        if not record.query.lstrip().upper().startswith(("SELECT", "WITH")):
            continue
        async with pool.acquire() as conn, conn.transaction():
            if settings is not None:
                await conn.execute(settings.query, *settings.args)
            if generic:
                await conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
            plan = await conn.fetch("EXPLAIN (ANALYZE, BUFFERS) " + record.query, *record.args)
        lines = [str(r[0]) for r in plan]
        print(f"  {label(record.query):<28} {summary(lines)}")
        out.append(f"-- {label(record.query)}\n-- client {record.elapsed * 1000:.1f} ms")
        out.extend(line[:300] for line in lines)
        out.append("")
        settings = None
    return "\n".join(out)


def summary(plan: list[str]) -> str:
    """Execution time and the top node's buffers, from a text plan."""
    buffers = next((line.strip() for line in plan if "Buffers:" in line), "Buffers: -")
    executed = next((line for line in plan if line.startswith("Execution Time")), "")
    return f"{executed.removeprefix('Execution Time: '):>12}  {buffers.removeprefix('Buffers: ')}"


async def run(args: argparse.Namespace, database_url: str) -> None:
    embedder = load_embedder("minilm")
    statements = Statements()

    async def on_connect(conn: asyncpg.Connection) -> None:
        conn.add_query_logger(statements.log)
        if args.plan_cache_mode:
            await conn.execute(f"SET plan_cache_mode = {args.plan_cache_mode}")

    # As the server opens its pool (server/services.py: recall's scan settings).
    pool = await create_pool(
        database_url, max_size=10, on_connect=on_connect, settings=SCAN_SESSION
    )
    cpu = ThreadPoolExecutor(CPU_THREADS, thread_name_prefix="profile-cpu")
    settings = Settings(
        home=Path("/nonexistent"),
        database_url=database_url,
        recall_graph_cache_mb=args.graph_cache_mb,
    )
    engine = RecallEngine.from_settings(
        settings, pool, embedder, cpu, graph_cache=args.graph_cache_mb > 0, scan_session=True
    )
    try:
        if engine.graph_cache is not None:
            started, before = time.perf_counter(), memory_mb()
            graph = await engine.graph_cache.read(BANK)
            after = memory_mb()
            print(
                f"graph cache: {graph.nbytes / 2**20:.1f} MB counted, read in "
                f"{time.perf_counter() - started:.1f}s; this process's resident memory "
                f"{before['VmRSS']:.0f} -> {after['VmRSS']:.0f} MB (peak {after['VmHWM']:.0f})"
                if graph is not None
                else "graph cache: bank over the capacity, walked in SQL"
            )
            if graph is not None:  # then the bank's token vectors, as the server does
                print(f"token-vector cache: {await engine.warm(BANK):,} blobs read", flush=True)
        async with pool.acquire() as conn:
            facts_n = int(
                await conn.fetchval("SELECT count(*) FROM memory_units WHERE bank_id = $1", BANK)
            )
        _, vocab = generate_facts(args.facts, seed=SEED, start=START, days=DAYS)
        days = max(60, round(DAYS * min(1.0, facts_n / args.facts)))
        queries = generate_queries(
            args.queries + args.warmup, vocab, seed=SEED + 1, start=START, days=days
        )
        stages: dict[str, list[float]] = {}
        by_label: dict[str, list[float]] = {}
        counts: dict[str, int] = {}
        first: list[LoggedQuery] = []
        async with pool.acquire() as conn:
            postmaster = parent_of(int(await conn.fetchval("SELECT pg_backend_pid()")))
        clock = CpuClock.now(postmaster)
        for index, query in enumerate(queries):
            statements.active = index >= args.warmup
            if index == args.warmup:
                clock = CpuClock.now(postmaster)
            request = RecallRequest(
                bank_id=BANK,
                query=query.text,
                budget=args.budget,
                query_timestamp=query.reference.astimezone(UTC),
                trace=True,
            )
            result = await engine.recall(request)
            taken = statements.take()
            if index < args.warmup:
                continue
            if not first:
                first = taken
            for name, value in result.timings_ms.items():
                stages.setdefault(name, []).append(value)
            for arm in result.arms:
                stages.setdefault(f"arm:{arm.arm}", []).append(arm.elapsed_ms)
            for record in taken:
                key = label(record.query)
                by_label.setdefault(key, []).append(record.elapsed * 1000)
                counts[key] = counts.get(key, 0) + 1
        spent = CpuClock.now(postmaster)
        print(f"bank {BANK}: {facts_n:,} facts; {args.queries} recalls, budget {args.budget}")
        per = 1000 / args.queries
        pg_ms = (
            f"{(spent.postgres - clock.postgres) * per:.1f}"
            if spent.postgres is not None and clock.postgres is not None
            else "n/a (remote)"
        )
        print(
            f"CPU per recall (ms): this process {(spent.process - clock.process) * per:.1f} "
            f"(event loop {(spent.loop - clock.loop) * per:.1f}, the rest in threads) · "
            f"PostgreSQL {pg_ms}"
        )
        print("stage medians (ms):")
        for name, values in stages.items():
            print(f"  {name:<12} {statistics.median(values):7.1f}  p95 {p95(values):7.1f}")
        print("statements (client-side ms; per recall, median, p95, total share):")
        total = sum(sum(v) for v in by_label.values()) or 1.0
        for key, values in sorted(by_label.items(), key=lambda kv: -sum(kv[1])):
            print(
                f"  {counts[key] / args.queries:4.1f}x {statistics.median(values):7.2f} "
                f"{p95(values):7.2f} {sum(values) / total:5.1%}  {key}"
            )
        if args.explain:
            print("EXPLAIN (ANALYZE, BUFFERS) of the first recall's statements:")
            args.explain.write_text(await explain(pool, first, args.generic))
            print(f"plans of the first recall's statements: {args.explain}")
    finally:
        await engine.close()
        cpu.shutdown(wait=False, cancel_futures=True)
        await pool.close()


def memory_mb() -> dict[str, float]:
    """This process's resident memory now and at its peak (MB), from /proc."""
    found: dict[str, float] = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            found[name] = int(value.split()[0]) / 1024
    return found


def p95(values: list[float]) -> float:
    return percentile(sorted(values), 0.95)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--facts", type=int, default=100_000, help="the bank's planned size")
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--budget", choices=("low", "mid", "high"), default="mid")
    parser.add_argument("--database-url", default="")
    parser.add_argument("--data-dir", default="", help="an embedded PostgreSQL to start")
    parser.add_argument("--explain", type=Path, help="write the first recall's plans here")
    parser.add_argument(
        "--plan-cache-mode",
        choices=("auto", "force_custom_plan", "force_generic_plan"),
        help="set on every connection (default: the pool's own)",
    )
    parser.add_argument(
        "--generic", action="store_true", help="explain the generic plans (see `explain`)"
    )
    parser.add_argument(
        "--graph-cache-mb",
        type=int,
        default=Settings(home=Path()).recall_graph_cache_mb,
        help="the bank's graph in memory (ENGRAM_RECALL_GRAPH_CACHE_MB); 0: walked in SQL",
    )
    args = parser.parse_args()
    if not args.database_url and not args.data_dir:
        parser.error("give --database-url or --data-dir")
    with bench_database(args.database_url, args.data_dir, "recall_latency") as database_url:
        asyncio.run(run(args, database_url))
    return 0


if __name__ == "__main__":
    started = datetime.now(UTC)
    code = main()
    print(f"({(datetime.now(UTC) - started).total_seconds():.0f} s)", file=sys.stderr)
    sys.exit(code)
