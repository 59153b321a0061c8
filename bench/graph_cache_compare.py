"""Recall with the bank's graph in memory against recall walking in SQL: the same answers?

Runs the recall engine in process twice over one pool, one engine reading in SQL and one
over the bank held in memory (engine/recall/graph_cache.py: the graph walk, the temporal
arm's exact window and spread, the keyword arm's exact BM25), on the synthetic queries of
bench/recall_latency.py's bank, and prints how many recalls returned the same facts in the
same order, how many graph and temporal arms found the same facts in the same order, and the
first differences. The SQL keyword arm screens large postings lists (engine/recall/keyword.py)
where the memory arm scores them all, so by default the SQL arm is made exact too
(`--screened-sql` keeps its screen: recalls then also differ wherever the screen was inexact).

    .venv/bin/python -m bench.graph_cache_compare --data-dir /work/cache-100k --queries 200
"""

from __future__ import annotations

import argparse
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC
from pathlib import Path

for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

from bench.in_process import compare_parser, run_compare  # noqa: E402
from bench.recall_latency import BANK, DAYS, SEED, START  # noqa: E402
from bench.synthetic_facts import generate_facts, generate_queries  # noqa: E402
from engine.db import create_pool  # noqa: E402
from engine.embedding import load_embedder  # noqa: E402
from engine.recall import keyword  # noqa: E402
from engine.recall.engine import RecallEngine  # noqa: E402
from engine.recall.types import Budget, RecallRequest, RecallResult  # noqa: E402
from engine.settings import Settings  # noqa: E402
from server.services import CPU_THREADS  # noqa: E402


def _arm_ids(result: RecallResult, name: str) -> list[str]:
    return [h.unit_id for arm in result.arms if arm.arm == name for h in arm.hits]


def _arm_scores(result: RecallResult, name: str) -> list[float]:
    return [h.score for arm in result.arms if arm.arm == name for h in arm.hits]


async def run(args: argparse.Namespace, database_url: str) -> int:
    embedder = load_embedder("minilm")
    pool = await create_pool(database_url, max_size=10)
    cpu = ThreadPoolExecutor(CPU_THREADS, thread_name_prefix="compare-cpu")
    settings = Settings(home=Path("/nonexistent"), database_url=database_url)
    sql = RecallEngine.from_settings(settings, pool, embedder, cpu)
    cached = RecallEngine.from_settings(settings, pool, embedder, cpu, graph_cache=True)
    differ = 0
    if not args.screened_sql:
        keyword.EXACT_POSTINGS = 2**62  # the SQL arm scores every posting, as memory does
    try:
        assert cached.graph_cache is not None
        if await cached.graph_cache.read(BANK) is None:
            print("the bank is over the graph cache's capacity")
            return 1
        async with pool.acquire() as conn:
            facts_n = int(
                await conn.fetchval("SELECT count(*) FROM memory_units WHERE bank_id = $1", BANK)
            )
        _, vocab = generate_facts(args.facts, seed=SEED, start=START, days=DAYS)
        days = max(60, round(DAYS * min(1.0, facts_n / args.facts)))
        queries = generate_queries(args.queries, vocab, seed=SEED + 2, start=START, days=days)
        same = same_graph = same_temporal = 0
        worst = 0.0  # the largest difference of a temporal hit's score
        budget: Budget = args.budget
        for query in queries:
            request = RecallRequest(
                bank_id=BANK,
                query=query.text,
                budget=budget,
                query_timestamp=query.reference.astimezone(UTC),
            )
            a = await sql.recall(request)
            b = await cached.recall(request)
            ids_a = [m.row.id for m in a.memories]
            ids_b = [m.row.id for m in b.memories]
            same += ids_a == ids_b
            same_graph += _arm_ids(a, "graph") == _arm_ids(b, "graph")
            same_temporal += _arm_ids(a, "temporal") == _arm_ids(b, "temporal")
            if _arm_ids(a, "temporal") == _arm_ids(b, "temporal"):
                pairs = zip(_arm_scores(a, "temporal"), _arm_scores(b, "temporal"), strict=True)
                worst = max([worst, *(abs(x - y) for x, y in pairs)])
            if ids_a != ids_b and differ < 5:
                differ += 1
                first = next(
                    i for i, (x, y) in enumerate(zip(ids_a, ids_b, strict=False)) if x != y
                )
                print(
                    f"differs: {query.text!r}: first at rank {first + 1}; top 10 in common "
                    f"{len(set(ids_a[:10]) & set(ids_b[:10]))}"
                )
        print(
            f"{len(queries)} recalls, budget {budget}: same facts in the same order "
            f"{same}/{len(queries)}; graph arm the same {same_graph}/{len(queries)}; "
            f"temporal arm the same {same_temporal}/{len(queries)} (scores within {worst:.1e})"
        )
        return 0 if same == len(queries) else 2
    finally:
        await cached.close()
        cpu.shutdown(wait=False, cancel_futures=True)
        await pool.close()


def main() -> int:
    parser = compare_parser(__doc__)
    parser.add_argument(
        "--screened-sql", action="store_true", help="keep the SQL keyword arm's screen"
    )
    return run_compare(parser, run)


if __name__ == "__main__":
    sys.exit(main())
