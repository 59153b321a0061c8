"""Scoring ranked dia_ids against gold evidence, and the tables the benchmark prints.

Per question with gold set G and ranking r (dia_ids, first occurrence kept, at most 50):
recall@k = |G ∩ r[:k]| / |G|; MRR = 1 / rank of the first gold id, 0 if none is ranked.
Means are per category; the headline is the question-weighted mean over categories 1-4,
category 5 (adversarial) is reported on its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from bench.locomo_data import CATEGORY_NAMES

KS: Final = (5, 10, 20)
MAX_RESULTS: Final = 50
HEADLINE_CATEGORIES: Final = frozenset({1, 2, 3, 4})


@dataclass(frozen=True)
class Scored:
    """One question's outcome for one system."""

    conversation: str
    category: int
    recall: tuple[float, ...]  # one per KS
    reciprocal_rank: float


@dataclass(frozen=True)
class Aggregate:
    questions: int
    recall: tuple[float, ...]  # one per KS
    mrr: float


def first_occurrences(ids: Iterable[str], limit: int = MAX_RESULTS) -> list[str]:
    """Distinct ids in rank order, first occurrence kept, at most `limit`."""
    seen: dict[str, None] = {}
    for dia_id in ids:
        if dia_id not in seen:
            seen[dia_id] = None
            if len(seen) == limit:
                break
    return list(seen)


def score_ranking(
    conversation: str, category: int, ranked: Sequence[str], gold: frozenset[str]
) -> Scored:
    if not gold:
        raise ValueError("a question without gold evidence cannot be scored")
    recall = tuple(len(gold.intersection(ranked[:k])) / len(gold) for k in KS)
    rank = next((i for i, dia_id in enumerate(ranked, start=1) if dia_id in gold), 0)
    return Scored(conversation, category, recall, 1.0 / rank if rank else 0.0)


def aggregate(scored: Sequence[Scored]) -> Aggregate:
    n = len(scored)
    if n == 0:
        return Aggregate(0, tuple(0.0 for _ in KS), 0.0)
    recall = tuple(sum(s.recall[i] for s in scored) / n for i in range(len(KS)))
    return Aggregate(n, recall, sum(s.reciprocal_rank for s in scored) / n)


def breakdown(scored: Sequence[Scored]) -> dict[str, Aggregate]:
    """Row label -> aggregate: each category present, "1-4" (headline) and "5"."""
    rows: dict[str, Aggregate] = {}
    for category in sorted({s.category for s in scored} - {5}):
        rows[str(category)] = aggregate([s for s in scored if s.category == category])
    rows["1-4"] = aggregate([s for s in scored if s.category in HEADLINE_CATEGORIES])
    rows["5"] = aggregate([s for s in scored if s.category == 5])
    return rows


def row_label(key: str) -> str:
    if key == "1-4":
        return "overall 1-4"
    return f"{key} {CATEGORY_NAMES[int(key)]}"


def comparison_table(results: dict[str, dict[str, Aggregate]]) -> str:
    """Rows: category then system; columns: N, R@5, R@10, R@20, MRR."""
    systems = list(results)
    width = max(len(s) for s in systems)
    keys = list(next(iter(results.values())))
    header = f"{'category':<16} {'system':<{width}} {'N':>5} " + " ".join(
        f"{'R@' + str(k):>6}" for k in KS
    )
    lines = [header + f" {'MRR':>6}", "-" * (len(header) + 7)]
    for key in keys:
        for i, system in enumerate(systems):
            agg = results[system][key]
            label = row_label(key) if i == 0 else ""
            cells = " ".join(f"{r:6.3f}" for r in agg.recall)
            lines.append(f"{label:<16} {system:<{width}} {agg.questions:>5} {cells} {agg.mrr:6.3f}")
        lines.append("")
    return "\n".join(lines).rstrip()


def headline_table(results: dict[str, dict[str, Aggregate]], k: int = 10) -> str:
    """Recall@k, one row per system, one column per category (the at-a-glance view)."""
    index = KS.index(k)
    systems = list(results)
    width = max(len(s) for s in systems)
    keys = list(next(iter(results.values())))
    header = f"{'recall@' + str(k):<{width}} " + " ".join(f"{row_label(c):>14}" for c in keys)
    lines = [header, "-" * len(header)]
    for system in systems:
        cells = " ".join(f"{results[system][c].recall[index]:>14.3f}" for c in keys)
        lines.append(f"{system:<{width}} {cells}")
    return "\n".join(lines)
