"""What the HNSW index costs a bulk import, by `ef_construction`, and what it buys.

The facts the local extractor makes from all 10 LoCoMo conversations (14.8k), embedded with
the default model, are inserted into an otherwise empty table that has only the HNSW index
(`vector_cosine_ops`, m 16), in batches of 1,500 as an import's upserts insert them, once per
`ef_construction`. Per value it prints the insert time (one connection, so ~ one core) and
the index's recall@10: for `--queries` of the facts, the share of their 10 exact nearest
neighbours an index scan at `hnsw.ef_search` 40 (recall's `low` budget) returns.

    .venv/bin/python -m bench.hnsw_cost                  # --ef-construction 64 40 32

Engram's index uses pgvector's default, 64 (engine/migrations/0001_initial.sql).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Final

import asyncpg
import numpy as np
from pgvector import Vector
from pgvector.asyncpg import register_vector

from bench.embedding_speed import locomo_facts
from bench.locomo_data import DEFAULT_DATA
from engine.embedding import MiniLMEmbedder
from engram.postgres import EmbeddedPostgres

INSERT_BATCH: Final = 1_500
EF_SEARCH: Final = 40
K: Final = 10


async def measure(
    dsn: str, vectors: np.ndarray, queries: np.ndarray, ef_constructions: list[int]
) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        await register_vector(conn)
        # Exact neighbours by brute force, the query fact itself left out.
        exact = np.argsort(-(vectors[queries] @ vectors.T), axis=1)[:, 1 : K + 1]
        print(f"{'ef_construction':>15} {'insert s':>9} {'ms/fact':>8} {'recall@10':>10}")
        for ef in ef_constructions:
            await conn.execute("DROP TABLE IF EXISTS hnsw_cost")
            await conn.execute(
                f"CREATE TABLE hnsw_cost (id int PRIMARY KEY, embedding vector({vectors.shape[1]}))"
            )
            await conn.execute(
                "CREATE INDEX ON hnsw_cost USING hnsw (embedding vector_cosine_ops)"
                f" WITH (ef_construction = {ef})"
            )
            started = time.perf_counter()
            for start in range(0, len(vectors), INSERT_BATCH):
                stop = min(start + INSERT_BATCH, len(vectors))
                await conn.execute(
                    "INSERT INTO hnsw_cost SELECT * FROM unnest($1::int[], $2::vector[])",
                    list(range(start, stop)),
                    [Vector(v) for v in vectors[start:stop]],
                )
            took = time.perf_counter() - started
            found = 0
            async with conn.transaction():
                await conn.execute("SET LOCAL enable_seqscan = off")
                await conn.execute(f"SET LOCAL hnsw.ef_search = {EF_SEARCH}")
                for row, query in enumerate(queries):
                    ids = await conn.fetch(
                        "SELECT id FROM hnsw_cost ORDER BY embedding <=> $1 LIMIT $2",
                        Vector(vectors[query]),
                        K + 1,
                    )
                    got = [r["id"] for r in ids if r["id"] != query][:K]
                    found += len(set(got) & set(exact[row].tolist()))
            recall = found / (len(queries) * K)
            print(f"{ef:>15} {took:>9.1f} {took / len(vectors) * 1000:>8.2f} {recall:>10.3f}")
    finally:
        await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--ef-construction", type=int, nargs="+", default=[64, 40, 32])
    parser.add_argument("--queries", type=int, default=300)
    args = parser.parse_args()
    texts = locomo_facts(args.data, limit=1_000_000)
    print(f"embedding {len(texts):,} LoCoMo facts...")
    vectors = MiniLMEmbedder().embed(texts)
    queries = np.random.default_rng(0).choice(len(texts), args.queries, replace=False)
    with tempfile.TemporaryDirectory(prefix="engram-hnsw-") as home:
        postgres = EmbeddedPostgres(Path(home) / "postgres", Path(home) / "postgres.log")
        postgres.start()
        try:
            asyncio.run(measure(postgres.dsn, vectors, queries, args.ef_construction))
        finally:
            postgres.stop()


if __name__ == "__main__":
    main()
