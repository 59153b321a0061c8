"""LoCoMo recall@k in process, over banks a `bench/locomo_retrieval.py` run filled: the same
questions, query time and scoring as the HTTP bench, the recall engine called directly, with
knobs changed for the run. Beside an HTTP run on the same banks it separates what the path
costs (request defaults, serialisation) from what the ranking does, and it A/Bs a knob
without restarting a server.

    .venv/bin/python -m bench.locomo_inprocess --dsn "$DSN" --conversations 1-10
    .venv/bin/python -m bench.locomo_inprocess --dsn "$DSN" --set mmr_lambda=0.7 \
        --profile graph_seed_hops=2 --types world,experience

`--set` changes a field of RecallConfig, `--profile` one of the budget's BudgetProfile. The
DSN is the stack's (`<ENGRAM_HOME>/postgres.password`, the socket in `<ENGRAM_HOME>/run`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, cast

from bench.locomo_data import DEFAULT_DATA, load_locomo, parse_selection
from bench.locomo_ingest import dia_ids_of
from bench.locomo_rankings import ENGRAM, QuestionOutcome, halves, percentile, score_all
from bench.retrieval_metrics import MAX_RESULTS, first_occurrences, headline_table
from engine.db import create_pool
from engine.embedding import load_embedder
from engine.recall.config import BudgetProfile, RecallConfig
from engine.recall.engine import RecallEngine
from engine.recall.rerank import MaxSimReranker
from engine.recall.token_cache import TokenVectorCache
from engine.recall.types import Budget, RecallRequest
from engine.types import FactType


@dataclass(frozen=True)
class _Profiled(RecallConfig):
    """RecallConfig with one budget's profile replaced."""

    profile: BudgetProfile | None = None

    def budget(self, name: Budget) -> BudgetProfile:
        return self.profile if self.profile is not None else super().budget(name)


def _value(text: str) -> Any:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return text


def _pairs(items: Sequence[str], allowed: set[str], what: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        name, sep, raw = item.partition("=")
        if not sep or name not in allowed:
            raise SystemExit(
                f"--{what} {item!r}: expected NAME=VALUE, NAME one of {sorted(allowed)}"
            )
        out[name] = _value(raw)
    return out


def config_of(args: argparse.Namespace) -> RecallConfig:
    settable = {f.name for f in fields(RecallConfig) if f.type in ("float", "int")}
    base = RecallConfig(**_pairs(args.set, settable, "set"))
    profiled = _pairs(args.profile, {f.name for f in fields(BudgetProfile)}, "profile")
    if not profiled:
        return base
    profile = replace(base.budget(args.budget), **profiled)
    return _Profiled(
        **{f.name: getattr(base, f.name) for f in fields(RecallConfig)}, profile=profile
    )


async def run(args: argparse.Namespace) -> dict[tuple[str, int], QuestionOutcome]:
    data = load_locomo(args.data)
    chosen = [data.conversations[n - 1] for n in parse_selection(args.conversations, 10)]
    config = config_of(args)
    embedder = load_embedder("minilm", None)
    pool = await create_pool(args.dsn, max_size=4)
    engine = RecallEngine(
        pool,
        embedder,
        ThreadPoolExecutor(2),
        MaxSimReranker(embedder.dimension, config.context_weight),
        config,
        token_cache=TokenVectorCache(512 * 2**20),
    )
    types = cast(tuple[FactType, ...], tuple(t for t in args.types.split(",") if t))
    outcomes: dict[tuple[str, int], QuestionOutcome] = {}
    seconds: list[float] = []
    try:
        for conversation in chosen:
            for index, question in enumerate(conversation.questions):
                request = RecallRequest(
                    bank_id=f"{args.prefix}{conversation.sample_id}",
                    query=question.question,
                    types=types,
                    budget=args.budget,
                    max_tokens=32_768,
                    query_timestamp=conversation.query_time,
                    include_entities=False,
                )
                started = time.perf_counter()
                result = await engine.recall(request)
                seconds.append(time.perf_counter() - started)
                ids: list[str] = []
                for memory in result.memories[:MAX_RESULTS]:
                    ids.extend(dia_ids_of({"metadata": memory.row.metadata}))
                outcome = QuestionOutcome(
                    conversation.sample_id,
                    question.category,
                    question.question,
                    sorted(question.evidence),
                )
                outcome.ranked[ENGRAM] = first_occurrences(ids)
                outcomes[(conversation.sample_id, index)] = outcome
            print(f"{conversation.sample_id}: done", file=sys.stderr, flush=True)
    finally:
        await pool.close()
    print(
        f"in-process recall over {len(seconds)} questions: p50 "
        f"{percentile(seconds, 50) * 1000:.1f} ms (wall, under whatever load the host has)"
    )
    numbered = {
        c.sample_id: n for n, c in zip(parse_selection(args.conversations, 10), chosen, strict=True)
    }
    print(headline_table(score_all(outcomes, [ENGRAM])))
    for label, half in halves(numbered):
        picked = {k: o for k, o in outcomes.items() if o.conversation in half}
        print(f"{label}\n{headline_table(score_all(picked, [ENGRAM]))}")
    return outcomes


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--dsn", required=True, help="the database holding the LoCoMo banks")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--prefix", default="locomo-", help="bank id = prefix + sample_id")
    parser.add_argument("--conversations", default="1-10")
    parser.add_argument("--budget", choices=("low", "mid", "high"), default="mid")
    parser.add_argument("--types", default="", help="comma-separated fact types; empty: all")
    parser.add_argument("--set", action="append", default=[], help="RecallConfig NAME=VALUE")
    parser.add_argument("--profile", action="append", default=[], help="BudgetProfile NAME=VALUE")
    parser.add_argument(
        "--json", type=Path, help="write the rankings here (locomo_misses reads it)"
    )
    args = parser.parse_args(argv)
    outcomes = asyncio.run(run(args))
    if args.json is not None:
        report = {"questions": [vars(o) for o in outcomes.values()]}
        args.json.write_text(json.dumps(report, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
