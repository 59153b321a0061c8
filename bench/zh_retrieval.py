"""Chinese retrieval benchmark: Engram through its public HTTP API beside in-process
baselines, on the conversation set of bench/zh_data.py, scored like LoCoMo.

Protocol as bench/locomo_retrieval.py: one bank, one retained item per turn ("<speaker>：
<text>", the session's timestamp, metadata {"dia_id", "conversation"}), one request per
session; every question recalled on its own at the start of the last session; the first 50
results mapped to dia_ids; recall@k by category (1 multi-hop, 2 temporal, 3 open-domain,
4 single-hop). The baselines rank the raw turns: BM25 over Chinese character bigrams, jieba
words, both, and words with their characters (engine/text.py's choice), and MiniLM cosine.

    .venv/bin/python -m bench.zh_retrieval --url http://127.0.0.1:8888
    .venv/bin/python -m bench.zh_retrieval --no-engram        # baselines only, no server
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Sequence
from functools import partial
from typing import Final

import httpx

from bench.baselines import BM25Index, DenseIndex
from bench.engram_api import BenchError, EngramAPI
from bench.locomo_data import Conversation
from bench.locomo_ingest import check_bank, ingest
from bench.locomo_rankings import (
    DEFAULT_MAX_TOKENS,
    ENGRAM,
    QuestionOutcome,
    percentile,
    recall_engram,
    record,
    score_all,
)
from bench.retrieval_metrics import MAX_RESULTS, comparison_table, headline_table
from bench.zh_data import conversation
from engine.bm25 import BM25Params
from engine.embedding import MiniLMEmbedder
from engine.extraction.local import LocalExtractor
from engine.text import CjkMode, tokenize, tokenize_with
from engine.types import ItemContext

BANK_PREFIX: Final = "zh-"
_MODES: Final[tuple[CjkMode, ...]] = ("bigrams", "words", "both", "words+chars")


def cpu_costs(conv: Conversation, repeats: int = 20) -> None:
    """Per-text CPU of the Chinese write path in this process (dictionary already loaded):
    the local extractor (segmenting, dates, entities) and BM25 tokenising."""
    extractor = LocalExtractor()
    turns = conv.turns
    extractor.extract(turns[0].content, ItemContext(turns[0].timestamp))  # warm-up
    started = time.perf_counter()
    for _ in range(repeats):
        for turn in turns:
            extractor.extract(turn.content, ItemContext(turn.timestamp))
    extract_ms = (time.perf_counter() - started) * 1000 / (repeats * len(turns))
    started = time.perf_counter()
    for _ in range(repeats):
        for turn in turns:
            tokenize(turn.content)
    tokenize_ms = (time.perf_counter() - started) * 1000 / (repeats * len(turns))
    print(f"per turn: local extraction {extract_ms:.2f} ms, BM25 tokenising {tokenize_ms:.3f} ms")


def run_baselines(
    conv: Conversation, outcomes: dict[tuple[str, int], QuestionOutcome], *, dense: bool
) -> list[str]:
    systems: list[str] = []
    texts = [t.content for t in conv.turns]
    questions = [q.question for q in conv.questions]
    for mode in _MODES:
        system = f"bm25 {mode}"
        index = BM25Index(texts, BM25Params(k1=1.5, b=0.75), partial(tokenize_with, cjk=mode))
        record(outcomes, conv, system, [index.search(q, MAX_RESULTS) for q in questions])
        systems.append(system)
    if dense:
        embedder = MiniLMEmbedder(intra_op_threads=2)
        record(
            outcomes, conv, "dense minilm", DenseIndex(embedder, texts).search_many(questions, 50)
        )
        systems.append("dense minilm")
    return systems


async def run_engram(
    url: str, conv: Conversation, outcomes: dict[tuple[str, int], QuestionOutcome]
) -> list[float]:
    async with httpx.AsyncClient(base_url=url, timeout=httpx.Timeout(600.0)) as client:
        api = EngramAPI(client)
        await api.ready()
        await api.reset_bank(f"{BANK_PREFIX}{conv.sample_id}")
        stats = await ingest(api, [conv], BANK_PREFIX, mode="sync", concurrency=1)
        print(f"ingest: {stats.turns} turns in {stats.seconds:.1f} s")
        check = await check_bank(api, f"{BANK_PREFIX}{conv.sample_id}", conv)
        print(
            f"bank: {check.facts} facts, {check.turns_with_facts}/{check.turns} turns traced, "
            f"{check.gold_ids_without_facts}/{check.gold_ids} evidence turns have no fact"
        )
        run = await recall_engram(
            api, [conv], BANK_PREFIX, outcomes, max_tokens=DEFAULT_MAX_TOKENS, budget="mid"
        )
        if run is None:
            raise BenchError("the server has no recall route")
        return run.latencies


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--url", default="http://127.0.0.1:8888", help="Engram's base URL")
    parser.add_argument("--no-engram", action="store_true", help="baselines only, no server")
    parser.add_argument("--no-dense", action="store_true", help="skip the MiniLM baseline")
    args = parser.parse_args(argv)
    conv = conversation()
    print(
        f"{conv.sample_id}: {len(conv.sessions)} sessions, {len(conv.turns)} turns, "
        f"{len(conv.questions)} questions"
    )
    outcomes = {
        (conv.sample_id, i): QuestionOutcome(
            conv.sample_id, q.category, q.question, sorted(q.evidence)
        )
        for i, q in enumerate(conv.questions)
    }
    systems: list[str] = []
    if not args.no_engram:
        try:
            latencies = asyncio.run(run_engram(args.url, conv, outcomes))
        except (BenchError, httpx.HTTPError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        systems.append(ENGRAM)
        print(
            f"recall latency (sequential, {len(latencies)} queries): p50 "
            f"{percentile(latencies, 50) * 1000:.1f} ms, mean "
            f"{statistics.fmean(latencies) * 1000:.1f} ms"
        )
    cpu_costs(conv)
    systems += run_baselines(conv, outcomes, dense=not args.no_dense)
    results = score_all(outcomes, systems)
    print()
    print(headline_table(results))
    print()
    print(comparison_table(results))
    if ENGRAM in systems:
        print("\nEngram's misses at 10:")
        for outcome in outcomes.values():
            top = outcome.ranked[ENGRAM][:10]
            missing = [g for g in outcome.gold if g not in top]
            if missing:
                print(f"  [{outcome.category}] {outcome.question} missing {missing}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
