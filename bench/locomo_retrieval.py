"""LoCoMo retrieval benchmark: Engram through its public HTTP API beside in-process baselines.

Protocol: ../shared/data/locomo/README.md. One bank per conversation; one retained item per
turn ("<speaker>: <text>" plus " [shares <caption>]"), timestamped with its session's date,
metadata {"dia_id", "conversation"}. How turns arrive is chosen by `--arrival` (requests of
up to 200 turns, async, as the reference client sends them): `session`, each session one
document (whole sessions to a request); `message`, the reference client's pattern, each turn
its own document (id "<sample>-s<NN>-t<NNN>", in turn order); `both` fills a bank of each
kind per conversation and prints them side by side. Every question is recalled on its own
(query = the question; query_timestamp = the start of the conversation's last session); the
first 50 results are mapped to dia_ids through their metadata and scored against the
normalised evidence. The baselines rank the same turns.

    .venv/bin/python -m bench.locomo_retrieval --conversations 1-5 --arrival both --json out.json

Tune on conversations 1-5; report all 10.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import httpx

from bench.engram_api import BenchError, EngramAPI
from bench.locomo_data import (
    DEFAULT_DATA,
    Conversation,
    DataError,
    LocomoData,
    load_locomo,
    parse_selection,
)
from bench.locomo_ingest import ARRIVALS, bank_id_of, check_bank, ingest, prefix_of
from bench.locomo_rankings import (
    DEFAULT_MAX_TOKENS,
    ENGRAM,
    EngramRun,
    QuestionOutcome,
    halves,
    percentile,
    recall_engram,
    run_baselines,
    score_all,
)
from bench.retrieval_metrics import KS, MAX_RESULTS, comparison_table, headline_table


def system_of(arrival: str, arrivals: Sequence[str]) -> str:
    return ENGRAM if len(arrivals) == 1 else f"{ENGRAM}, {arrival} documents"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="locomo10.json")
    parser.add_argument("--url", default="http://127.0.0.1:8888", help="Engram's base URL")
    parser.add_argument("--bank-prefix", default="locomo-", help="bank id = prefix + sample_id")
    parser.add_argument(
        "--conversations", default="all", help='1-based selection: "1-5", "1,3,6-10", "all"'
    )
    parser.add_argument(
        "--reuse", action="store_true", help="keep existing banks instead of recreating them"
    )
    parser.add_argument(
        "--skip-ingest", action="store_true", help="query the banks a previous run filled"
    )
    parser.add_argument(
        "--arrival",
        choices=(*ARRIVALS, "both"),
        default="session",
        help="one document per session, per message, or both side by side",
    )
    parser.add_argument("--ingest-mode", choices=("sync", "async"), default="async")
    parser.add_argument(
        "--ingest-concurrency", type=int, default=8, help="retain requests in flight"
    )
    parser.add_argument("--max-tokens", type=int, default=DEFAULT_MAX_TOKENS)
    parser.add_argument("--budget", choices=("low", "mid", "high"), default="mid")
    parser.add_argument("--no-engram", action="store_true", help="baselines only, no server")
    parser.add_argument("--no-dense", action="store_true", help="skip the MiniLM baseline")
    parser.add_argument("--json", type=Path, help="write machine-readable results here")
    args = parser.parse_args(argv)
    if args.ingest_concurrency < 1:
        parser.error("--ingest-concurrency must be at least 1")
    if args.max_tokens < 1:
        parser.error("--max-tokens must be at least 1")
    return args


async def run_engram(
    args: argparse.Namespace,
    conversations: Sequence[Conversation],
    outcomes: dict[tuple[str, int], QuestionOutcome],
    report: dict[str, Any],
) -> dict[str, EngramRun]:
    """Ingest (unless skipped) and recall for each arrival asked for: system name -> run;
    empty when the server has no recall."""
    arrivals = ARRIVALS if args.arrival == "both" else (args.arrival,)
    timeout = httpx.Timeout(900.0, connect=10.0)
    runs: dict[str, EngramRun] = {}
    async with httpx.AsyncClient(base_url=args.url, timeout=timeout) as client:
        api = EngramAPI(client)
        await api.ready()
        for arrival in arrivals:
            run = await run_arrival(api, args, arrival, conversations, outcomes, report)
            if run is None:
                print("Engram has no recall endpoint yet: reporting the baselines only")
                return {}
            runs[system_of(arrival, arrivals)] = run
    return runs


async def run_arrival(
    api: EngramAPI,
    args: argparse.Namespace,
    arrival: str,
    conversations: Sequence[Conversation],
    outcomes: dict[tuple[str, int], QuestionOutcome],
    report: dict[str, Any],
) -> EngramRun | None:
    prefix = prefix_of(args.bank_prefix, arrival)
    arrivals = ARRIVALS if args.arrival == "both" else (args.arrival,)
    entry: dict[str, Any] = report.setdefault("arrivals", {}).setdefault(arrival, {})
    if not args.skip_ingest:
        if not args.reuse:
            for conversation in conversations:
                await api.reset_bank(bank_id_of(prefix, conversation))
        stats = await ingest(
            api,
            conversations,
            prefix,
            mode=args.ingest_mode,
            concurrency=args.ingest_concurrency,
            arrival=arrival,
        )
        print(
            f"ingest, {arrival} documents ({stats.mode}, {stats.concurrency} in flight): "
            f"{stats.turns} turns in {stats.sessions} requests, {stats.seconds:.1f} s wall, "
            f"{stats.turns_per_second:.1f} turns/s"
        )
        entry["ingest"] = {**asdict(stats), "turns_per_second": stats.turns_per_second}
    for conversation in conversations:
        if not await api.bank_exists(bank_id_of(prefix, conversation)):
            raise BenchError(
                f"bank {bank_id_of(prefix, conversation)} does not exist: "
                "run without --skip-ingest first"
            )
    checks = [await check_bank(api, bank_id_of(prefix, c), c) for c in conversations]
    facts = sum(c.facts for c in checks)
    covered = sum(c.turns_with_facts for c in checks)
    turns = sum(c.turns for c in checks)
    print(
        f"banks, {arrival} documents: {facts} facts, {covered}/{turns} turns traced by dia_id, "
        f"{sum(c.facts_without_dia_id for c in checks)} facts without one; "
        f"{sum(c.gold_ids_without_facts for c in checks)}/{sum(c.gold_ids for c in checks)} "
        "evidence turns have no fact"
    )
    entry["banks"] = [asdict(c) for c in checks]
    return await recall_engram(
        api,
        conversations,
        prefix,
        outcomes,
        max_tokens=args.max_tokens,
        budget=args.budget,
        system=system_of(arrival, arrivals),
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        data: LocomoData = load_locomo(args.data)
        numbers = parse_selection(args.conversations, len(data.conversations))
    except (DataError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    conversations = [data.conversations[n - 1] for n in numbers]
    print(f"data: {args.data} sha256 {data.sha256[:12]}… ok")
    print(data.report.summary())
    print(
        f"conversations {args.conversations} -> {', '.join(c.sample_id for c in conversations)}: "
        f"{sum(len(c.turns) for c in conversations)} turns, "
        f"{sum(len(c.questions) for c in conversations)} questions"
    )
    outcomes = {
        (c.sample_id, i): QuestionOutcome(c.sample_id, q.category, q.question, sorted(q.evidence))
        for c in conversations
        for i, q in enumerate(c.questions)
    }
    report: dict[str, Any] = {
        "data": {"path": str(args.data), "sha256": data.sha256},
        "conversations": [c.sample_id for c in conversations],
        "settings": {
            "url": args.url,
            "bank_prefix": args.bank_prefix,
            "max_tokens": args.max_tokens,
            "budget": args.budget,
            "max_results": MAX_RESULTS,
        },
    }
    systems: list[str] = []
    if not args.no_engram:
        try:
            runs = asyncio.run(run_engram(args, conversations, outcomes, report))
        except (BenchError, httpx.HTTPError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        for system, run in runs.items():
            systems.append(system)
            p50, p95 = percentile(run.latencies, 50), percentile(run.latencies, 95)
            mean = statistics.fmean(run.latencies)
            print(
                f"{system} recall latency (client-side, sequential, {len(run.latencies)} "
                f"queries): p50 {p50 * 1000:.1f} ms, p95 {p95 * 1000:.1f} ms, "
                f"mean {mean * 1000:.1f} ms; "
                f"{run.results_without_dia_id}/{run.results_total} results without a dia_id"
            )
            report.setdefault("latency_ms", {})[system] = {
                "p50": p50 * 1000,
                "p95": p95 * 1000,
                "mean": mean * 1000,
            }
    baseline_seconds = run_baselines(conversations, outcomes, dense=not args.no_dense)
    systems.extend(baseline_seconds)
    report["baseline_seconds"] = baseline_seconds
    results = score_all(outcomes, systems)
    print()
    print(headline_table(results))
    print()
    print(comparison_table(results))
    numbered = {c.sample_id: n for n, c in zip(numbers, conversations, strict=True)}
    for label, half in halves(numbered):
        print(f"\n{label}")
        picked = {key: o for key, o in outcomes.items() if o.conversation in half}
        print(headline_table(score_all(picked, systems)))
    if args.json is not None:
        report["results"] = {
            system: {
                key: {
                    "questions": agg.questions,
                    **{f"recall@{k}": r for k, r in zip(KS, agg.recall, strict=True)},
                    "mrr": agg.mrr,
                }
                for key, agg in rows.items()
            }
            for system, rows in results.items()
        }
        report["questions"] = [asdict(o) for o in outcomes.values()]
        args.json.write_text(json.dumps(report, indent=1), encoding="utf-8")
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
