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
import re
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Final

import httpx

from bench.baselines import BM25Index, DenseIndex
from bench.engram_api import BenchError, EngramAPI, RetainItem
from bench.locomo_data import (
    DEFAULT_DATA,
    Conversation,
    DataError,
    LocomoData,
    Session,
    load_locomo,
    parse_selection,
)
from bench.retrieval_metrics import (
    KS,
    MAX_RESULTS,
    Aggregate,
    Scored,
    breakdown,
    comparison_table,
    first_occurrences,
    headline_table,
    score_ranking,
)
from engine.bm25 import BM25Params
from engine.embedding import MiniLMEmbedder

ENGRAM: Final = "engram"
ARRIVALS: Final = ("session", "message")
# The reference client sends a conversation's messages 200 to a request.
MESSAGES_PER_REQUEST: Final = 200
# Banks of the message arrival: bank id = prefix + this + sample_id.
MESSAGE_BANK_INFIX: Final = "msg-"
BM25_PLAIN: Final = "bm25 k1=1.5 b=0.75"
BM25_DATED: Final = "bm25+date k1=0.9 b=0.4"
DENSE: Final = "dense minilm"
# A recall may return facts (several per turn) or observations; 50 results of ~30 tokens
# each fit comfortably, so the token budget never decides which 50 come back.
DEFAULT_MAX_TOKENS: Final = 32_768
_DIA_ID_SPLIT: Final = re.compile(r"[,;\s]+")


@dataclass
class IngestStats:
    arrival: str
    mode: str
    concurrency: int
    sessions: int
    turns: int
    seconds: float

    @property
    def turns_per_second(self) -> float:
        return self.turns / self.seconds if self.seconds > 0 else 0.0


@dataclass
class BankCheck:
    bank_id: str
    facts: int
    turns: int
    turns_with_facts: int
    facts_without_dia_id: int
    gold_ids: int
    gold_ids_without_facts: int  # evidence no recall can find: an upper bound on recall


@dataclass
class QuestionOutcome:
    conversation: str
    category: int
    question: str
    gold: list[str]
    ranked: dict[str, list[str]] = field(default_factory=dict)  # system -> dia_ids


@dataclass
class EngramRun:
    latencies: list[float]
    results_without_dia_id: int
    results_total: int


def bank_id_of(prefix: str, conversation: Conversation) -> str:
    return f"{prefix}{conversation.sample_id}"


def session_items(conversation: Conversation, session: Session) -> list[RetainItem]:
    return [
        RetainItem(
            t.content,
            t.timestamp,
            {"dia_id": t.dia_id, "conversation": conversation.sample_id},
        )
        for t in session.turns
    ]


def document_id_of(conversation: Conversation, session: Session) -> str:
    return f"{conversation.sample_id}-session-{session.number}"


def message_items(conversation: Conversation) -> list[RetainItem]:
    """Every turn of the conversation as its own document, in order."""
    return [
        replace(
            item,
            document_id=f"{conversation.sample_id}-s{session.number:02d}-t{index:03d}",
        )
        for session in conversation.sessions
        for index, item in enumerate(session_items(conversation, session), start=1)
    ]


def requests_of(conversation: Conversation, arrival: str) -> list[tuple[str, list[RetainItem]]]:
    """(request document id, items) of each retain request for the conversation: up to 200
    items a request, as the reference client sends them. `session` never splits a session
    (a later request naming the same document would replace it)."""
    if arrival == "message":
        items = message_items(conversation)
        return [
            (f"{conversation.sample_id}-batch-{start}", items[start : start + MESSAGES_PER_REQUEST])
            for start in range(0, len(items), MESSAGES_PER_REQUEST)
        ]
    requests: list[tuple[str, list[RetainItem]]] = []
    for session in conversation.sessions:
        document_id = document_id_of(conversation, session)
        items = [replace(i, document_id=document_id) for i in session_items(conversation, session)]
        if requests and len(requests[-1][1]) + len(items) <= MESSAGES_PER_REQUEST:
            requests[-1][1].extend(items)
        else:
            requests.append((document_id, items))
    return requests


def system_of(arrival: str, arrivals: Sequence[str]) -> str:
    return ENGRAM if len(arrivals) == 1 else f"{ENGRAM}, {arrival} documents"


def prefix_of(prefix: str, arrival: str) -> str:
    return prefix if arrival == "session" else prefix + MESSAGE_BANK_INFIX


async def ingest(
    api: EngramAPI,
    conversations: Sequence[Conversation],
    prefix: str,
    *,
    mode: str,
    concurrency: int,
    arrival: str = "session",
) -> IngestStats:
    """Retain every conversation, in order, as `arrival` says (`requests_of`); returns the
    wall time of it all.

    `sync`: requests that wait for their facts, `concurrency` in flight, started in order.
    `async`: queue every request (`concurrency` submissions in flight), then poll the
    operations until all have completed.
    """
    jobs = [(c, *request) for c in conversations for request in requests_of(c, arrival)]
    slots = asyncio.Semaphore(concurrency)

    async def send(
        conversation: Conversation, document_id: str, items: list[RetainItem], wait: bool
    ) -> str:
        async with slots:
            body = await api.retain(bank_id_of(prefix, conversation), document_id, items, wait=wait)
        return str(body["operation_id"])

    started = time.perf_counter()
    if mode == "sync":
        await asyncio.gather(*(send(c, d, items, True) for c, d, items in jobs))
    else:
        operation_ids = await asyncio.gather(*(send(c, d, items, False) for c, d, items in jobs))
        await api.wait_operations(
            [(bank_id_of(prefix, c), op) for (c, _, _), op in zip(jobs, operation_ids, strict=True)]
        )
    seconds = time.perf_counter() - started
    turns = sum(len(items) for _, _, items in jobs)
    return IngestStats(arrival, mode, concurrency, len(jobs), turns, seconds)


def dia_ids_of(result: dict[str, Any]) -> list[str]:
    metadata = result.get("metadata") or {}
    raw = metadata.get("dia_id") if isinstance(metadata, dict) else None
    if not raw:
        return []
    return [part for part in _DIA_ID_SPLIT.split(str(raw)) if part]


async def check_bank(api: EngramAPI, bank_id: str, conversation: Conversation) -> BankCheck:
    """How many facts the bank holds and how many turns they trace back to."""
    memories = await api.list_memories(bank_id)
    covered: set[str] = set()
    missing = 0
    for memory in memories:
        ids = dia_ids_of(memory)
        covered.update(ids)
        missing += not ids
    turns = {t.dia_id for t in conversation.turns}
    gold = {dia_id for q in conversation.questions for dia_id in q.evidence}
    return BankCheck(
        bank_id,
        len(memories),
        len(turns),
        len(covered & turns),
        missing,
        len(gold),
        len(gold - covered),
    )


async def recall_engram(
    api: EngramAPI,
    conversations: Sequence[Conversation],
    prefix: str,
    outcomes: dict[tuple[str, int], QuestionOutcome],
    *,
    max_tokens: int,
    budget: str,
    system: str = ENGRAM,
) -> EngramRun | None:
    """Recall every question, one request at a time; None when the server has no recall."""
    first = conversations[0]
    # One warm-up request, not timed: the server's first query loads models and plans.
    warm = await api.recall(
        bank_id_of(prefix, first),
        first.questions[0].question,
        query_timestamp=first.query_time,
        max_tokens=max_tokens,
        budget=budget,
    )
    if warm is None:
        return None
    run = EngramRun([], 0, 0)
    for conversation in conversations:
        bank_id = bank_id_of(prefix, conversation)
        for index, question in enumerate(conversation.questions):
            recalled = await api.recall(
                bank_id,
                question.question,
                query_timestamp=conversation.query_time,
                max_tokens=max_tokens,
                budget=budget,
            )
            if recalled is None:
                raise BenchError("the recall route disappeared during the run")
            run.latencies.append(recalled.seconds)
            top = recalled.results[:MAX_RESULTS]
            run.results_total += len(top)
            ids: list[str] = []
            for result in top:
                found = dia_ids_of(result)
                run.results_without_dia_id += not found
                ids.extend(found)
            outcomes[(conversation.sample_id, index)].ranked[system] = first_occurrences(ids)
    return run


def record(
    outcomes: dict[tuple[str, int], QuestionOutcome],
    conversation: Conversation,
    system: str,
    rankings: list[list[int]],
) -> None:
    """Store a baseline's turn-index rankings, one per question, as dia_ids."""
    turns = conversation.turns
    for index, ranking in enumerate(rankings):
        outcomes[(conversation.sample_id, index)].ranked[system] = [
            turns[i].dia_id for i in ranking
        ]


def run_baselines(
    conversations: Sequence[Conversation],
    outcomes: dict[tuple[str, int], QuestionOutcome],
    *,
    dense: bool,
) -> dict[str, float]:
    """Rank each conversation's turns for its questions; returns seconds per baseline."""
    seconds: dict[str, float] = {BM25_PLAIN: 0.0, BM25_DATED: 0.0}
    embedder = MiniLMEmbedder(intra_op_threads=2) if dense else None
    if embedder is not None:
        seconds[DENSE] = 0.0
    plain_params = BM25Params(k1=1.5, b=0.75)
    dated_params = BM25Params(k1=0.9, b=0.4)
    for conversation in conversations:
        turns = conversation.turns
        questions = [q.question for q in conversation.questions]

        for system, params, texts in (
            (BM25_PLAIN, plain_params, [t.content for t in turns]),
            (BM25_DATED, dated_params, [f"{t.session_date} {t.content}" for t in turns]),
        ):
            started = time.perf_counter()
            index = BM25Index(texts, params)
            record(
                outcomes, conversation, system, [index.search(q, MAX_RESULTS) for q in questions]
            )
            seconds[system] += time.perf_counter() - started
        if embedder is not None:
            started = time.perf_counter()
            dense_index = DenseIndex(embedder, [t.content for t in turns])
            record(outcomes, conversation, DENSE, dense_index.search_many(questions, MAX_RESULTS))
            seconds[DENSE] += time.perf_counter() - started
    return seconds


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile, q in [0, 100]."""
    ordered = sorted(values)
    if not ordered:
        return 0.0
    position = (len(ordered) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


# Recall was tuned on conversations 1-5 only; 6-10 are the held-out half.
TUNING_CONVERSATIONS: Final = range(1, 6)


def halves(numbered: dict[str, int]) -> list[tuple[str, frozenset[str]]]:
    """The tuning and held-out halves of the selection, when it has both."""
    tuning = frozenset(c for c, n in numbered.items() if n in TUNING_CONVERSATIONS)
    held_out = frozenset(numbered) - tuning
    if not tuning or not held_out:
        return []
    return [
        ("tuning half (conversations 1-5)", tuning),
        ("held-out half (conversations 6-10)", held_out),
    ]


def score_all(
    outcomes: dict[tuple[str, int], QuestionOutcome], systems: Sequence[str]
) -> dict[str, dict[str, Aggregate]]:
    results: dict[str, dict[str, Aggregate]] = {}
    for system in systems:
        scored: list[Scored] = [
            score_ranking(o.conversation, o.category, o.ranked[system], frozenset(o.gold))
            for o in outcomes.values()
        ]
        results[system] = breakdown(scored)
    return results


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
