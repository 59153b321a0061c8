"""What the recall benches share to run the server in their own process: the database (a
given URL, or an embedded PostgreSQL in a data directory, stopped afterwards), a Temporal
client recall never uses, and the bank's graph read into memory before timing."""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Callable, Coroutine, Iterator
from contextlib import AbstractAsyncContextManager, contextmanager
from pathlib import Path
from typing import Any

import httpx
from temporalio.client import Client

from engram.postgres import EmbeddedPostgres
from server.services import Services


def compare_parser(doc: str) -> argparse.ArgumentParser:
    """The options the compare benches share: the 100k bank's plan, queries, budget and where
    its database is."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--facts", type=int, default=100_000, help="the bank's planned size")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--budget", choices=("low", "mid", "high"), default="mid")
    parser.add_argument("--database-url", default="")
    parser.add_argument("--data-dir", default="", help="an embedded PostgreSQL to start")
    return parser


def run_compare(
    parser: argparse.ArgumentParser,
    run: Callable[[argparse.Namespace, str], Coroutine[Any, Any, int]],
) -> int:
    """Parse the options and run the compare against recall_latency's database."""
    args = parser.parse_args()
    if not args.database_url and not args.data_dir:
        parser.error("give --database-url or --data-dir")
    with bench_database(args.database_url, args.data_dir, "recall_latency") as database_url:
        return asyncio.run(run(args, database_url))


@contextmanager
def bench_database(url: str, data_dir: str, name: str) -> Iterator[str]:
    """`url` if given, else database `name` of an embedded PostgreSQL in `data_dir`."""
    if url:
        yield url
        return
    root = Path(data_dir)
    root.mkdir(parents=True, exist_ok=True)
    postgres = EmbeddedPostgres(root / "pg", root / "postgres.log")
    postgres.start()
    try:
        yield postgres.create_database(name)
    finally:
        postgres.stop()


async def lazy_temporal() -> Client:
    """Recall never talks to Temporal; the services record wants a client all the same."""
    return await Client.connect("127.0.0.1:1", lazy=True)


def never() -> AbstractAsyncContextManager[Services]:
    raise AssertionError("the lifespan does not run under the ASGI transport")


async def read_graph(services: Services, bank: str) -> float:
    """Read the bank's graph into the server's memory before the warm-up, then its token
    vectors into theirs (a server does both in the background after its first recall of the
    bank); the graph's size in MB, 0: off."""
    cache = services.recall.graph_cache
    if cache is None:
        return 0.0
    started = time.perf_counter()
    graph = await cache.read(bank)
    if graph is None:
        print(f"graph cache: bank {bank} is over {cache.capacity / 2**20:.0f} MB, walked in SQL")
        return 0.0
    size = graph.nbytes / 2**20
    facts = len(graph.facts.ids)
    print(
        f"graph cache: {facts:,} facts read in {time.perf_counter() - started:.1f}s, "
        f"{size:.1f} MB ({graph.nbytes / max(facts, 1):,.0f} B a fact)",
        flush=True,
    )
    # The server then reads the bank's token vectors into their cache (engine.warm).
    started = time.perf_counter()
    warmed = await services.recall.warm(bank)
    tokens = services.recall.token_cache
    print(
        f"token-vector cache: {warmed:,} blobs read in {time.perf_counter() - started:.1f}s, "
        f"{tokens.size_bytes / 2**20:.1f} MB held",
        flush=True,
    )
    return round(size, 1)


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    index = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[index]


async def blob_sources(client: httpx.AsyncClient) -> tuple[float, float]:
    """The server's count of token-vector blobs taken from its cache and read from the
    database so far (`engram_recall_token_vectors_total` on /metrics)."""
    text = (await client.get("/metrics")).text
    counts = {"cache": 0.0, "database": 0.0}
    for line in text.splitlines():
        for source in counts:
            if line.startswith(f'engram_recall_token_vectors_total{{source="{source}"}} '):
                counts[source] = float(line.split()[-1])
    return counts["cache"], counts["database"]
