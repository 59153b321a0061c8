"""Combined scoring: the relevance from fusion and the reranker, plus bounded boosts.

    base  = α · norm(reranker) + (1 − α) · norm(fused)          (min-max over the candidates)
    α     = rerank_weight · known share of the query's tokens    (the reranker's model reads
            "给小林写稿要注意什么" as 7 [UNK] of 9 tokens: its MaxSim over them is noise, and
            a Chinese query is then ranked by fusion, i.e. BM25 over words, instead)
    final = base + w_rec · recency + w_tmp · proximity + w_prf · proof + w_obs · [observation]

recency   = 0.5 ^ (age_days / half_life), age from the fact's date (occurred, else mentioned)
            to the reference time; 0 for an undated fact.
proximity = 1 inside the query's window, else 1 / (1 + distance / window length); only when
            the query has a window.
proof     = min(1, log10(proof_count)): corroborated observations, 0 for a single fact.
question  = 1 for a fact that is a question someone asked ("Seen any good movies lately?"),
            subtracted: it repeats the words of a question about the topic without answering
            it, so MaxSim ranks it above the answers.
temporal  = k / (k + rank) of the fact in the temporal arm (k = rrf_k), 0 when that arm did not
            find it: the arm's own order (in-window facts nearest the query) as a feature.
overlap   = share of the query's words the fact contains (lower-cased ASCII words, stop words
            included): MaxSim rewards a near match of each token, this an exact one.
final    += w_trk · temporal + w_ovl · overlap
The weights of these and the others were fitted together on LoCoMo conversations 1-5 by
bench/locomo_rank_fit.py (engine/recall/config.py has the figures).
Every boost is in [0, 1] and has its own weight, so a boost measured not to help is simply
weighted 0 (recency is: on LoCoMo any weight > 0 lowered recall@10).

The lifecycle's boosts (docs/lifecycle.md) come per bank with the request, all 0 by default:
    + w_str · strength + w_imp · importance + w_rec' · recency
where strength and importance are the fact's own, in [0, 1], and w_rec' adds to the
configured recency weight.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from engine.recall.config import RecallConfig
from engine.recall.types import CandidateRow, RankingBoosts, TimeWindow

_DAY_S = 86400.0
_WORD_RE = re.compile(r"[a-z0-9']+")


@dataclass(frozen=True)
class Boosts:
    recency: float
    proximity: float
    proof: float


def normalise(values: Sequence[float]) -> list[float]:
    """Min-max to [0, 1]; all equal → all 1."""
    if not values:
        return []
    low, high = min(values), max(values)
    if high - low <= 0:
        return [1.0] * len(values)
    return [(v - low) / (high - low) for v in values]


def fact_time(row: CandidateRow) -> datetime | None:
    return row.occurred_start or row.mentioned_at


def recency(row: CandidateRow, reference: datetime, half_life_days: float) -> float:
    at = fact_time(row)
    if at is None or half_life_days <= 0:
        return 0.0
    age_days = max((reference - at).total_seconds() / _DAY_S, 0.0)
    return float(0.5 ** (age_days / half_life_days))


def proximity(row: CandidateRow, window: TimeWindow) -> float:
    start = row.occurred_start or row.mentioned_at
    if start is None:
        return 0.0
    end = row.occurred_end or start
    if start < window.end and end >= window.start:
        return 1.0
    distance = (window.start - end) if end < window.start else (start - window.end)
    length = max((window.end - window.start).total_seconds() / _DAY_S, 1.0)
    return 1.0 / (1.0 + distance.total_seconds() / _DAY_S / length)


# The question mark of each script: Latin, full-width (Chinese, Japanese), Arabic. A Chinese
# question ("陈默：为什么？") missed the penalty while it ended only in "?".
_QUESTION_MARKS = ("?", "？", "؟")


def is_question(text: str) -> bool:
    return text.rstrip().endswith(_QUESTION_MARKS)


def words(text: str) -> set[str]:
    """The overlap feature's words: lower-cased ASCII runs, stop words kept."""
    return set(_WORD_RE.findall(text.lower()))


def overlap(query_words: set[str], text: str) -> float:
    if not query_words:
        return 0.0
    return len(query_words & words(text)) / len(query_words)


def proof(row: CandidateRow) -> float:
    return min(1.0, math.log10(max(row.proof_count, 1)))


def boosts(
    row: CandidateRow, reference: datetime, window: TimeWindow | None, config: RecallConfig
) -> Boosts:
    return Boosts(
        recency=recency(row, reference, config.recency_half_life_days),
        proximity=proximity(row, window) if window is not None else 0.0,
        proof=proof(row),
    )


def combined_scores(
    rows: Sequence[CandidateRow],
    fused: Sequence[float],
    reranked: Sequence[float] | None,
    *,
    reference: datetime,
    window: TimeWindow | None,
    prefer_observations: bool,
    config: RecallConfig,
    understood: float = 1.0,
    lifecycle: RankingBoosts | None = None,
    asks_time: bool = False,
    temporal_ranks: Sequence[int | None] | None = None,
    query: str = "",
) -> list[float]:
    """`temporal_ranks[i]`: candidate i's rank in the temporal arm (None: not found by it)."""
    fused_n = normalise(fused)
    if reranked is None:
        base = fused_n
    else:
        alpha = config.rerank_weight * understood
        base = [
            alpha * r + (1 - alpha) * f for r, f in zip(normalise(reranked), fused_n, strict=True)
        ]
    extra = lifecycle or RankingBoosts()
    ranks = temporal_ranks if temporal_ranks is not None else [None] * len(rows)
    query_words = words(query) if config.term_overlap_weight > 0 else set()
    k = config.rrf_k
    finals: list[float] = []
    for row, relevance, rank in zip(rows, base, ranks, strict=True):
        b = boosts(row, reference, window, config)
        score = (
            relevance
            + extra.strength * row.strength
            + extra.importance * row.importance
            + (config.recency_weight + extra.recency) * b.recency
            + config.temporal_weight * b.proximity
            + config.proof_weight * b.proof
        )
        if rank is not None:
            score += config.temporal_rank_weight * k / (k + rank)
        if query_words:
            score += config.term_overlap_weight * overlap(query_words, row.text)
        if asks_time and row.occurred_start is not None:
            score += config.dated_answer_weight * relevance
        if is_question(row.text):
            score -= config.question_penalty
        if prefer_observations and row.fact_type == "observation":
            score += config.observation_boost
        finals.append(score)
    return finals
