"""Recall's CPU stage, run in the thread pool: rerank the fetched candidates, combine their
scores, apply the request's floors, and diversify within the order shown (time window first,
facts not current at the query's time after every current one, then MMR)."""

from __future__ import annotations

import time
from datetime import datetime

import numpy as np

from engine.recall.budget import estimate_tokens
from engine.recall.config import RecallConfig
from engine.recall.lifecycle import is_current
from engine.recall.mmr import mmr_order
from engine.recall.query import QueryVectors
from engine.recall.rerank import Reranker
from engine.recall.scoring import combined_scores
from engine.recall.types import (
    CandidateRow,
    Fused,
    Ranked,
    RecalledMemory,
    RecallRequest,
    Scores,
    TimeWindow,
)
from engine.recall.window import window_tier

# A tier past the window's three (inside, undated, outside): facts not current at the time.
_NOT_CURRENT = 3


def rank(
    config: RecallConfig,
    reranker: Reranker | None,
    request: RecallRequest,
    vectors: QueryVectors,
    rows: list[CandidateRow],
    fused: list[Fused],
    reference: datetime,
    window: TimeWindow | None,
    asks_time: bool = False,
) -> Ranked:
    """CPU stage (thread pool): rerank, combine, floor, diversify."""
    started = time.perf_counter()
    if not rows:
        return Ranked([], 0.0, 0, 0, 0, 0)
    reranked = reranker.score(request.query, vectors.tokens, rows) if reranker is not None else None
    embeddings = np.stack([row.embedding for row in rows])
    semantic = embeddings @ vectors.vector
    finals = combined_scores(
        rows,
        [f.score for f in fused],
        reranked,
        reference=reference,
        window=window,
        prefer_observations=request.prefer_observations,
        config=config,
        understood=vectors.known_share,
        lifecycle=request.boosts,
        asks_time=asks_time,
        temporal_ranks=[f.ranks.get("temporal") for f in fused],
        query=request.query,
    )
    floors = request.min_scores
    keep: list[int] = []
    for i, f in enumerate(fused):
        keyword = f.scores.get("keyword", 0.0)
        if (
            (floors.semantic is not None and semantic[i] < floors.semantic)
            or (floors.keyword is not None and keyword < floors.keyword)
            or (
                floors.reranker is not None
                and reranked is not None
                and reranked[i] < floors.reranker
            )
            or (floors.final is not None and finals[i] < floors.final)
        ):
            continue
        keep.append(i)
    by_final = sorted(keep, key=lambda i: (-finals[i], i))
    # The window outranks every score (engine/recall/window.py) and facts not yet known at
    # the query's time go after every current one (engine/recall/lifecycle.py); MMR
    # diversifies within that order, the one shown (engine/recall/mmr.py).
    when = request.as_of or reference
    windowed = [window_tier(rows[i], window) for i in by_final]
    tiers = [
        t + _NOT_CURRENT * (not is_current(rows[i], when, as_of=request.as_of is not None))
        for t, i in zip(windowed, by_final, strict=True)
    ]
    order = [
        by_final[j]
        for j in mmr_order(
            [finals[i] for i in by_final], embeddings[by_final], config.mmr_lambda, tiers
        )
    ]
    memories = [
        RecalledMemory(
            rows[i],
            Scores(
                final=finals[i],
                semantic=float(semantic[i]),
                keyword=fused[i].scores.get("keyword"),
                reranker=reranked[i] if reranked is not None else None,
                fused=fused[i].score,
                arms=dict(fused[i].scores),
                ranks=dict(fused[i].ranks),
            ),
            estimate_tokens(rows[i].text),
        )
        for i in order
    ]
    moved_by_rerank = sum(1 for pos, i in enumerate(by_final) if i != keep[pos])
    by_window = sorted(range(len(by_final)), key=lambda j: (windowed[j], j))
    moved_by_window = sum(1 for pos, j in enumerate(by_window) if pos != j)
    by_tier = [by_final[j] for j in sorted(range(len(by_final)), key=lambda j: (tiers[j], j))]
    moved_by_mmr = sum(1 for a, b in zip(order, by_tier, strict=True) if a != b)
    elapsed = (time.perf_counter() - started) * 1000
    return Ranked(
        memories, elapsed, len(rows) - len(keep), moved_by_rerank, moved_by_mmr, moved_by_window
    )
