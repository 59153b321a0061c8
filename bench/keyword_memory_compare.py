"""The keyword arm from the cached postings against the SQL arm: the same hits? Exact?

On the synthetic queries of bench/recall_latency.py's bank, per query: the SQL arm as recall
runs it (plain statement up to EXACT_POSTINGS, screened above), the memory arm
(engine/recall/keyword_memory.py), and for screened queries the plain statement forced (the
exact formula over every posting). Prints, below EXACT_POSTINGS, how many memory arms return
the statement's ids in order with its scores; above, the top-10 overlap of the screen with the
memory arm and whether the memory arm equals the forced exact statement; then the whole recall
with both arms from memory against recall all in SQL (same facts in the same order), once as
recall runs (SQL screening) and once with the SQL arm forced exact (EXACT_POSTINGS raised: the
two must then agree), and the per-arm medians.

    .venv/bin/python -m bench.keyword_memory_compare --data-dir /work/kw-100k --queries 200
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC
from pathlib import Path

for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

from bench.in_process import compare_parser, run_compare  # noqa: E402
from bench.recall_latency import BANK, DAYS, SEED, START  # noqa: E402
from bench.synthetic_facts import generate_facts, generate_queries  # noqa: E402
from engine.bm25 import BM25Params  # noqa: E402
from engine.db import create_pool  # noqa: E402
from engine.embedding import load_embedder  # noqa: E402
from engine.recall import keyword  # noqa: E402
from engine.recall.engine import RecallEngine  # noqa: E402
from engine.recall.filters import filter_args, visible_states  # noqa: E402
from engine.recall.keyword_memory import memory_keyword_arm  # noqa: E402
from engine.recall.types import ArmHit, Budget, RecallRequest  # noqa: E402
from engine.settings import Settings  # noqa: E402
from engine.text import tokenize  # noqa: E402
from server.services import CPU_THREADS  # noqa: E402


def _same(a: list[ArmHit], b: list[ArmHit]) -> bool:
    return [h.unit_id for h in a] == [h.unit_id for h in b] and all(
        math.isclose(x.score, y.score, rel_tol=1e-9) for x, y in zip(a, b, strict=True)
    )


async def run(args: argparse.Namespace, database_url: str) -> int:
    embedder = load_embedder("minilm")
    pool = await create_pool(database_url, max_size=10)
    cpu = ThreadPoolExecutor(CPU_THREADS, thread_name_prefix="compare-cpu")
    settings = Settings(home=Path("/nonexistent"), database_url=database_url)
    sql = RecallEngine.from_settings(settings, pool, embedder, cpu)
    cached = RecallEngine.from_settings(settings, pool, embedder, cpu, graph_cache=True)
    params = BM25Params()
    budget: Budget = args.budget
    limit = cached.config.budget(budget).arm_limit
    try:
        assert cached.graph_cache is not None
        graph = await cached.graph_cache.read(BANK)
        if graph is None:
            print("the bank is over the graph cache's capacity")
            return 1
        facts_n = len(graph.facts.ids)
        p = graph.postings
        print(
            f"postings: {len(p.units):,} for {facts_n:,} facts, {len(p.index):,} terms, "
            f"{p.nbytes / 2**20:.1f} MB ({p.nbytes / max(facts_n, 1):.0f} B a fact); "
            f"graph {graph.nbytes / 2**20:.1f} MB in all"
        )
        _, vocab = generate_facts(args.facts, seed=SEED, start=START, days=DAYS)
        days = max(60, round(DAYS * min(1.0, facts_n / args.facts)))
        queries = generate_queries(args.queries, vocab, seed=SEED + 2, start=START, days=days)
        below = below_same = above = above_exact = 0
        overlaps: list[float] = []
        sql_ms: list[float] = []
        mem_ms: list[float] = []
        recalls_same = recalls_keyword_differs = recalls_exact_same = 0
        for query in queries:
            request = RecallRequest(
                bank_id=BANK,
                query=query.text,
                budget=budget,
                query_timestamp=query.reference.astimezone(UTC),
            )
            terms = tokenize(query.text)
            started = time.perf_counter()
            async with pool.acquire() as conn:
                arm = await keyword.keyword_arm(conn, request, terms, limit=limit, params=params)
            sql_ms.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            mem = memory_keyword_arm(graph, request, terms, limit, params)
            mem_ms.append((time.perf_counter() - started) * 1000)
            if not arm.note.startswith("screened"):
                below += 1
                below_same += _same(arm.hits, mem.hits)
            else:
                above += 1
                top = {h.unit_id for h in mem.hits[:10]}
                overlaps.append(len(top & {h.unit_id for h in arm.hits[:10]}) / max(len(top), 1))
                distinct = list(dict.fromkeys(terms))
                statement = keyword.keyword_sql(request.tags_match, visible_states(request))
                async with pool.acquire() as conn:
                    rows = await conn.fetch(
                        statement, *filter_args(request), distinct, params.k1, params.b, limit
                    )
                exact = [ArmHit(r["id"], float(r["score"])) for r in rows]
                above_exact += _same(exact, mem.hits)
            a = await sql.recall(request)
            b = await cached.recall(request)
            same = [m.row.id for m in a.memories] == [m.row.id for m in b.memories]
            recalls_same += same
            if not same:
                kw_a = [h.unit_id for x in a.arms if x.arm == "keyword" for h in x.hits]
                kw_b = [h.unit_id for x in b.arms if x.arm == "keyword" for h in x.hits]
                recalls_keyword_differs += kw_a != kw_b
            screened_at = keyword.EXACT_POSTINGS
            keyword.EXACT_POSTINGS = 2**62  # the SQL arm scores every posting
            try:
                c = await sql.recall(request)
            finally:
                keyword.EXACT_POSTINGS = screened_at
            recalls_exact_same += [m.row.id for m in c.memories] == [m.row.id for m in b.memories]
        n = len(queries)
        print(
            f"{n} queries, budget {budget}, arm limit {limit}: below EXACT_POSTINGS "
            f"{below_same}/{below} identical ids and scores; screened {above}: memory equals "
            f"the exact statement {above_exact}/{above}, top-10 overlap of the screen with "
            f"exact {statistics.fmean(overlaps) if overlaps else 1.0:.3f} "
            f"(min {min(overlaps) if overlaps else 1.0:.2f})"
        )
        print(
            f"whole recall, both arms from memory vs all SQL: same facts in the same order "
            f"{recalls_same}/{n}; of the {n - recalls_same} that differ, the keyword arm "
            f"differs in {recalls_keyword_differs}; against SQL forced exact: the same "
            f"{recalls_exact_same}/{n}"
        )
        print(
            f"keyword arm median: SQL {statistics.median(sql_ms):.2f} ms, memory "
            f"{statistics.median(mem_ms):.2f} ms (p95 {sorted(sql_ms)[int(0.95 * n)]:.2f} / "
            f"{sorted(mem_ms)[int(0.95 * n)]:.2f} ms; wall time on a shared host)"
        )
        agree = below_same == below and above_exact == above and recalls_exact_same == n
        return 0 if agree else 2
    finally:
        await cached.close()
        cpu.shutdown(wait=False, cancel_futures=True)
        await pool.close()


def main() -> int:
    return run_compare(compare_parser(__doc__), run)


if __name__ == "__main__":
    sys.exit(main())
