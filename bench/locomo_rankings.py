"""Ranking LoCoMo's questions: Engram's recall over HTTP and the in-process baselines (BM25,
dense MiniLM), as dia_ids per question, and their scores."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from bench.baselines import BM25Index, DenseIndex
from bench.engram_api import BenchError, EngramAPI
from bench.locomo_data import Conversation
from bench.locomo_ingest import bank_id_of, dia_ids_of
from bench.retrieval_metrics import (
    MAX_RESULTS,
    Aggregate,
    Scored,
    breakdown,
    first_occurrences,
    score_ranking,
)
from engine.bm25 import BM25Params
from engine.embedding import MiniLMEmbedder

ENGRAM: Final = "engram"
BM25_PLAIN: Final = "bm25 k1=1.5 b=0.75"
BM25_DATED: Final = "bm25+date k1=0.9 b=0.4"
DENSE: Final = "dense minilm"
# A recall may return facts (several per turn) or observations; 50 results of ~30 tokens
# each fit comfortably, so the token budget never decides which 50 come back.
DEFAULT_MAX_TOKENS: Final = 32_768


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
