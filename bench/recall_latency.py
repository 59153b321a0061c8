"""Recall latency at scale: a bank of 100k synthetic facts, concurrent clients, through the
HTTP route (`POST /v1/default/banks/{bank}/memories/recall`) of the real Starlette app.

    .venv/bin/python -m bench.recall_latency                      # build once (cached), measure
    .venv/bin/python -m bench.recall_latency --clients 8 --queries 2000 --json out.json
    .venv/bin/python -m bench.recall_latency --no-build     # measure the bank as far as built

Building the bank: retain's own steps without Temporal, one document (25 facts, 5 chunks) at
a time, in the order the retain workflow runs them — `stage_extracted` (the synthetic facts
play the extractor), `embed_staged` (real MiniLM sentence and token vectors), the entity
step, `link_staged` (semantic, temporal, entity links) and `upsert_document` (units, BM25
terms and statistics, unit_entities, links, entity counts). So the bank holds the rows a
retain writes; the LLM extractor and the workflow around the steps are skipped, and the
entity step takes a shortcut: the generator knows every canonical name, so entities are
created under the id `engine.retain.resolve.entity_id` gives them, without resolve's fuzzy
candidate search (a third of the build time at 1k facts, and growing with the bank).
Documents already stored are skipped, so an interrupted build resumes and a rerun reuses the
bank (`--data-dir` keeps the embedded PostgreSQL).

Measuring: the app runs in this process (httpx's ASGI transport: no sockets, the same event
loop for clients and server, as one uvicorn worker has); `--clients` coroutines send
`--queries` recalls between them, budget `mid`, all four arms on; each query names people,
places or projects and a time ("last spring", "in June 2023"), asked at a "now" inside the
facts' span. Latency is client-side wall time per request; one untimed warm-up pass first.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import random
import statistics
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

# Before numpy/onnxruntime load: one BLAS thread per process (see engram/supervisor.py).
for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import asyncpg  # noqa: E402
import httpx  # noqa: E402

from bench.in_process import (  # noqa: E402
    bench_database,
    blob_sources,
    lazy_temporal,
    never,
    percentile,
    read_graph,
)
from bench.synthetic_facts import (  # noqa: E402
    SyntheticFact,
    SyntheticQuery,
    generate_facts,
    generate_queries,
)
from engine.db import Connection, Pool, create_pool, migrate  # noqa: E402
from engine.embedding import Embedder, load_embedder  # noqa: E402
from engine.entities import normalize_name  # noqa: E402
from engine.recall.semantic import SCAN_SESSION  # noqa: E402
from engine.retain.gate import OrderedGate  # noqa: E402
from engine.retain.links import link_staged  # noqa: E402
from engine.retain.payloads import (  # noqa: E402
    ChunkJob,
    DocumentPlan,
    ExtractionBatch,
    LinkOptions,
    RetainItem,
    UpsertDocument,
)
from engine.retain.resolve import entity_id  # noqa: E402
from engine.retain.staging import embed_staged, stage_extracted  # noqa: E402
from engine.retain.upsert import upsert_document  # noqa: E402
from engine.settings import Settings  # noqa: E402
from engine.store.banks import ensure_bank  # noqa: E402
from engine.types import ExtractedFact, ItemContext  # noqa: E402
from server.app import create_app  # noqa: E402
from server.services import CPU_THREADS, Services  # noqa: E402

BANK: Final = "latency-100k"
SEED: Final = 20240601
START: Final = datetime(2021, 1, 1, tzinfo=UTC)
DAYS: Final = 4 * 365
FACTS_PER_CHUNK: Final = 5
CHUNKS_PER_DOCUMENT: Final = 5
BUILDERS: Final = 2  # documents in flight while building (embedding overlaps the SQL)
DEFAULT_DATA_DIR: Final = Path.home() / ".cache" / "engram-bench" / "recall-latency"
URL: Final = "/v1/default/banks/{bank}/memories/recall"


@dataclass
class Figures:
    facts: int
    clients: int
    queries: int
    errors: int
    seconds: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    mean_ms: float
    throughput_qps: float
    arms_fired: dict[str, int]
    server_ms: dict[str, float]
    token_cache_mb: int
    token_cache_hit_rate: float  # over the timed recalls
    graph_cache_mb: float = 0.0  # the bank's graph in the server's memory (0: walked in SQL)


# ---------------------------------------------------------------- building the bank


def _documents(facts: list[SyntheticFact]) -> list[list[SyntheticFact]]:
    size = FACTS_PER_CHUNK * CHUNKS_PER_DOCUMENT
    return [facts[i : i + size] for i in range(0, len(facts), size)]


def chunks_of(bank: str, document_id: str, facts: list[SyntheticFact]) -> list[ChunkJob]:
    out: list[ChunkJob] = []
    offset = 0
    for index in range(0, len(facts), FACTS_PER_CHUNK):
        part = facts[index : index + FACTS_PER_CHUNK]
        text = " ".join(f.fact.text for f in part)
        out.append(
            ChunkJob(
                bank_id=bank,
                document_id=document_id,
                chunk_id=f"{document_id}-c{index // FACTS_PER_CHUNK}",
                text=text,
                mentioned_at=part[0].mentioned_at,
                content_hash=hashlib.sha256(text.encode()).hexdigest(),
                char_start=offset,
                char_end=offset + len(text),
            )
        )
        offset += len(text) + 1
    return out


# The exact-name shortcut for retain's resolve step (see the module docstring): the generator
# knows each canonical name, so entities are created under the id resolve would give them
# (`entity_id`) and the staged facts get their ids, without resolve's fuzzy candidate search.
_CREATE_ENTITIES = """
INSERT INTO entities (id, bank_id, canonical_name, normalized_name, kind, first_seen, last_seen)
SELECT e.id, $1, e.name, e.normalized, e.kind, $6, $6
FROM unnest($2::uuid[], $3::text[], $4::text[], $5::text[]) AS e(id, name, normalized, kind)
ORDER BY e.normalized
ON CONFLICT (bank_id, normalized_name) DO NOTHING
"""
_SET_ENTITY_IDS = """
UPDATE staged_facts AS s SET entity_ids = v.ids::uuid[]
FROM unnest($1::uuid[], $2::text[]) AS v(fact_id, ids)
WHERE s.fact_id = v.fact_id
"""


async def _name_entities(
    conn: Connection, bank: str, fact_ids: list[str], facts: list[ExtractedFact], seen: datetime
) -> None:
    named: dict[str, tuple[str, str]] = {}
    per_fact: list[str] = []
    for fact in facts:
        ids: list[str] = []
        for entity in fact.entities:
            key = normalize_name(entity.name)
            named.setdefault(key, (entity.name, entity.kind))
            if entity_id(bank, key) not in ids:
                ids.append(entity_id(bank, key))
        per_fact.append("{" + ",".join(ids) + "}")
    keys = sorted(named)
    async with conn.transaction():
        await conn.execute(
            _CREATE_ENTITIES,
            bank,
            [entity_id(bank, k) for k in keys],
            [named[k][0] for k in keys],
            keys,
            [named[k][1] for k in keys],
            seen,
        )
        await conn.execute(_SET_ENTITY_IDS, fact_ids, per_fact)


async def store_document(
    pool: Pool,
    embedder: Embedder,
    cpu: ThreadPoolExecutor,
    gate: OrderedGate,
    bank: str,
    document_id: str,
    facts: list[SyntheticFact],
) -> None:
    chunks = chunks_of(bank, document_id, facts)
    by_chunk = {
        c.chunk_id: [f.fact for f in facts[i * FACTS_PER_CHUNK : (i + 1) * FACTS_PER_CHUNK]]
        for i, c in enumerate(chunks)
    }

    async def extract(chunk: ChunkJob, context: ItemContext) -> list[ExtractedFact]:
        return by_chunk[chunk.chunk_id]

    operation = f"bench-{document_id}"
    async with pool.acquire() as conn:
        staged = await stage_extracted(conn, ExtractionBatch(operation, "local", chunks), extract)
    await embed_staged(pool, embedder, cpu, staged, gate)
    async with pool.acquire() as conn:
        await _name_entities(
            conn,
            bank,
            staged.fact_ids,
            [f for part in by_chunk.values() for f in part],
            facts[0].mentioned_at,
        )
    await link_staged(pool, cpu, LinkOptions(bank, operation, staged.fact_ids))
    content = "\n\n".join(c.text for c in chunks)
    item = RetainItem(content=content, timestamp=facts[0].mentioned_at)
    plan = DocumentPlan(document_id, chunks, [], [])
    for attempt in range(5):
        try:
            async with pool.acquire() as conn:
                await upsert_document(conn, UpsertDocument(bank, operation, plan, [item]))
            break
        except asyncpg.DeadlockDetectedError:
            if attempt == 4:
                raise
            await asyncio.sleep(0.05 * (attempt + 1))


async def build_bank(
    pool: Pool, embedder: Embedder, cpu: ThreadPoolExecutor, facts: list[SyntheticFact]
) -> None:
    async with pool.acquire() as conn:
        await ensure_bank(conn, BANK)
        stored = {
            r["document_id"]
            for r in await conn.fetch("SELECT document_id FROM documents WHERE bank_id = $1", BANK)
        }
    documents = [
        (f"doc-{i:06d}", part)
        for i, part in enumerate(_documents(facts))
        if f"doc-{i:06d}" not in stored
    ]
    if not documents:
        return
    print(f"building: {len(documents)} documents to store ({len(stored)} already stored)")
    started = time.perf_counter()
    done = 0
    gate = OrderedGate(BUILDERS)
    queue: asyncio.Queue[tuple[str, list[SyntheticFact]]] = asyncio.Queue()
    for doc in documents:
        queue.put_nowait(doc)

    async def builder() -> None:
        nonlocal done
        while not queue.empty():
            document_id, part = queue.get_nowait()
            await store_document(pool, embedder, cpu, gate, BANK, document_id, part)
            done += 1
            if done % 100 == 0:
                elapsed = time.perf_counter() - started
                rate = done * len(part) / elapsed
                left = (len(documents) - done) * len(part) / rate
                print(
                    f"  {done}/{len(documents)} documents, {rate:.0f} facts/s, ~{left:.0f}s left",
                    flush=True,
                )

    await asyncio.gather(*(builder() for _ in range(BUILDERS)))
    async with pool.acquire() as conn:
        await conn.execute("ANALYZE")
    print(f"built in {time.perf_counter() - started:.0f}s")


async def bank_counts(pool: Pool) -> dict[str, int]:
    async with pool.acquire() as conn:
        row = await conn.fetchrow(
            """
            SELECT (SELECT count(*) FROM memory_units WHERE bank_id = $1) AS facts,
                   (SELECT count(*) FROM memory_terms WHERE bank_id = $1) AS postings,
                   (SELECT count(*) FROM bank_term_stats WHERE bank_id = $1) AS terms,
                   (SELECT count(*) FROM entities WHERE bank_id = $1) AS entities,
                   (SELECT count(*) FROM unit_entities WHERE bank_id = $1) AS mentions,
                   (SELECT count(*) FROM memory_links WHERE bank_id = $1) AS links,
                   (SELECT count(*) FROM memory_units
                     WHERE bank_id = $1 AND token_vectors IS NOT NULL) AS token_vectors
            """,
            BANK,
        )
    assert row is not None
    return {k: int(v) for k, v in row.items()}


# ---------------------------------------------------------------- measuring


def recall_body(query: SyntheticQuery, trace: bool = False) -> dict[str, Any]:
    return {
        "query": query.text,
        "budget": "mid",
        "max_tokens": 4096,
        "query_timestamp": query.reference.isoformat(),
        "trace": trace,
    }


async def arms_fired(
    client: httpx.AsyncClient, queries: list[SyntheticQuery], bank: str = BANK
) -> Counter[str]:
    """How many of these queries each arm returned candidates for (traced, untimed)."""
    fired: Counter[str] = Counter()
    for query in queries:
        response = await client.post(URL.format(bank=bank), json=recall_body(query, trace=True))
        response.raise_for_status()
        for arm, info in response.json()["trace"]["arms"].items():
            fired[arm] += info["candidates"] > 0
    return fired


async def measure(
    client: httpx.AsyncClient, queries: list[SyntheticQuery], clients: int, bank: str = BANK
) -> tuple[list[float], int, float]:
    """Client-side milliseconds of the successful recalls, errors, wall seconds."""
    latencies: list[float] = []
    errors = 0
    next_index = 0

    async def one_client() -> None:
        nonlocal next_index, errors
        while next_index < len(queries):
            query = queries[next_index]
            next_index += 1
            started = time.perf_counter()
            response = await client.post(URL.format(bank=bank), json=recall_body(query))
            elapsed = (time.perf_counter() - started) * 1000
            if response.status_code != 200:
                errors += 1
                print(f"  HTTP {response.status_code}: {response.text[:200]}", file=sys.stderr)
                continue
            latencies.append(elapsed)

    started = time.perf_counter()
    await asyncio.gather(*(one_client() for _ in range(clients)))
    return latencies, errors, time.perf_counter() - started


async def run(args: argparse.Namespace, database_url: str) -> Figures:
    embedder = load_embedder("minilm")
    await migrate(database_url, embedder.dimension, embedder.space)
    pool = await create_pool(database_url, max_size=args.pool)
    # Recall's, opened as the server opens its own (server/services.py: recall's scan settings).
    serving = await create_pool(database_url, max_size=args.pool, settings=SCAN_SESSION)
    cpu = ThreadPoolExecutor(CPU_THREADS, thread_name_prefix="bench-cpu")
    services: Services | None = None
    try:
        facts, vocab = generate_facts(args.facts, seed=SEED, start=START, days=DAYS)
        if not args.no_build:
            await build_bank(pool, embedder, cpu, facts)
        counts = await bank_counts(pool)
        print("bank:", ", ".join(f"{k} {v:,}" for k, v in counts.items()), flush=True)
        if counts["facts"] < args.facts and not args.no_build:
            raise SystemExit(f"the bank holds {counts['facts']} facts, expected {args.facts}")
        # A partly built bank (--no-build) covers the first part of the span: ask inside it.
        days = max(60, round(DAYS * min(1.0, counts["facts"] / args.facts)))
        settings = Settings(
            home=Path(args.data_dir),
            database_url=database_url,
            recall_token_cache_mb=args.token_cache_mb,
            recall_graph_cache_mb=args.graph_cache_mb,
        )
        services = Services(
            settings,
            serving,
            await lazy_temporal(),
            embedder,
            cpu,
            graph_cache=args.graph_cache_mb > 0,
            scan_session=True,
        )
        graph_mb = await read_graph(services, BANK)
        app = create_app(never)
        app.state.services = services
        queries = generate_queries(
            args.queries + args.warmup, vocab, seed=SEED, start=START, days=days
        )
        rng = random.Random(SEED)
        warmup, timed = queries[: args.warmup], queries[args.warmup :]
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://engram.bench", timeout=60
        ) as client:
            fired = await arms_fired(client, rng.sample(warmup, min(50, len(warmup))))
            print(f"arms with candidates (of {min(50, len(warmup))} traced queries):", dict(fired))
            await measure(client, warmup, args.clients)
            cached, read = await blob_sources(client)
            latencies, errors, seconds = await measure(client, timed, args.clients)
            cached_after, read_after = await blob_sources(client)
            hits, misses = cached_after - cached, read_after - read
            server = await server_timings(client, timed[: min(100, len(timed))])
        ordered = sorted(latencies)
        return Figures(
            facts=counts["facts"],
            clients=args.clients,
            queries=len(timed),
            errors=errors,
            seconds=round(seconds, 2),
            p50_ms=round(percentile(ordered, 0.50), 1),
            p95_ms=round(percentile(ordered, 0.95), 1),
            p99_ms=round(percentile(ordered, 0.99), 1),
            mean_ms=round(statistics.fmean(ordered), 1) if ordered else 0.0,
            throughput_qps=round(len(latencies) / seconds, 1) if seconds else 0.0,
            arms_fired=dict(fired),
            server_ms=server,
            token_cache_mb=args.token_cache_mb,
            token_cache_hit_rate=round(hits / (hits + misses), 3) if hits + misses else 0.0,
            graph_cache_mb=graph_mb,
        )
    finally:
        if services is not None:
            await services.recall.close()
        cpu.shutdown(wait=False, cancel_futures=True)
        await pool.close()
        await serving.close()


async def server_timings(
    client: httpx.AsyncClient, queries: list[SyntheticQuery], bank: str = BANK
) -> dict[str, float]:
    """Median per-stage and per-arm server timings, one query at a time (traced)."""
    stages: dict[str, list[float]] = {}
    for query in queries:
        response = await client.post(URL.format(bank=bank), json=recall_body(query, trace=True))
        response.raise_for_status()
        trace = response.json()["trace"]
        for name, value in trace["timings_ms"].items():
            stages.setdefault(name, []).append(float(value))
        for arm, info in trace["arms"].items():
            stages.setdefault(f"arm:{arm}", []).append(float(info["elapsed_ms"]))
    return {name: round(statistics.median(values), 2) for name, values in stages.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--facts", type=int, default=100_000)
    parser.add_argument("--clients", type=int, default=4, help="concurrent recall clients")
    parser.add_argument("--queries", type=int, default=1000, help="timed recalls")
    parser.add_argument("--warmup", type=int, default=100, help="untimed recalls first")
    parser.add_argument("--pool", type=int, default=10, help="server connection pool size")
    parser.add_argument(
        "--database-url",
        default="",
        help="an existing PostgreSQL (with pgvector); default: an embedded one in --data-dir",
    )
    parser.add_argument(
        "--data-dir",
        default=str(DEFAULT_DATA_DIR),
        help="the embedded PostgreSQL's home, kept between runs so the bank is built once",
    )
    parser.add_argument(
        "--no-build", action="store_true", help="measure the bank as it is (partly built)"
    )
    parser.add_argument(
        "--token-cache-mb",
        type=int,
        default=Settings(home=Path()).recall_token_cache_mb,
        help="the server's token-vector cache (ENGRAM_RECALL_TOKEN_CACHE_MB); 0: off",
    )
    parser.add_argument(
        "--graph-cache-mb",
        type=int,
        default=Settings(home=Path()).recall_graph_cache_mb,
        help="the server's bank graphs in memory (ENGRAM_RECALL_GRAPH_CACHE_MB); 0: off",
    )
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    with bench_database(args.database_url, args.data_dir, "recall_latency") as database_url:
        figures = asyncio.run(run(args, database_url))
    print(
        f"\n{figures.facts:,} facts · {figures.clients} clients · {figures.queries} recalls "
        f"in {figures.seconds}s · errors {figures.errors}\n"
        f"p50 {figures.p50_ms} ms · p95 {figures.p95_ms} ms · p99 {figures.p99_ms} ms · "
        f"mean {figures.mean_ms} ms · {figures.throughput_qps} recalls/s\n"
        f"server medians (ms, one at a time): {figures.server_ms}\n"
        f"token-vector cache {figures.token_cache_mb} MB: "
        f"{figures.token_cache_hit_rate:.0%} of blob reads served from memory; "
        f"graph cache {figures.graph_cache_mb} MB"
    )
    if args.json:
        args.json.write_text(json.dumps(asdict(figures), indent=2))
    return 1 if figures.errors else 0


if __name__ == "__main__":
    sys.exit(main())
