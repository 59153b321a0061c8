"""A recall's trace: per-arm candidates, ranks, scores and timings, fusion and rerank
decisions, and how the token budget was filled."""

from __future__ import annotations

from typing import Any

from engine.recall.config import RecallConfig
from engine.recall.query import QueryText
from engine.recall.types import (
    ArmName,
    ArmResult,
    BlobCounts,
    Fused,
    Ranked,
    RecalledMemory,
    RecallRequest,
    TimeWindow,
)
from engine.recall.window import placement

TRACE_TOP = 20  # hits per arm and fused candidates listed in a trace


def build_trace(
    request: RecallRequest,
    text: QueryText,
    window: TimeWindow | None,
    arms: list[ArmResult],
    fused: list[Fused],
    ranked: Ranked,
    kept: list[RecalledMemory],
    used: int,
    timings_ms: dict[str, float],
    config: RecallConfig,
    reranker_name: str,
    blobs: BlobCounts,
) -> dict[str, Any]:
    """The `trace` of a recall: what each arm found, fusion, rerank, scoring and budget."""
    profile = config.budget(request.budget)
    arm_trace: dict[ArmName, Any] = {
        arm.arm: {
            "candidates": len(arm.hits),
            "elapsed_ms": round(arm.elapsed_ms, 3),
            "note": arm.note,
            "weight": config.weights.get(arm.arm, 0.0),
            "cap": config.caps.get(arm.arm),
            "hits": [
                {"id": h.unit_id, "rank": rank, "score": h.score}
                | ({"path": list(arm.paths[h.unit_id])} if h.unit_id in arm.paths else {})
                for rank, h in enumerate(arm.hits[:TRACE_TOP], start=1)
            ],
        }
        for arm in arms
    }
    for arm in arms:
        if arm.paths:
            # How the walk reached the returned facts, also those another arm found first.
            arm_trace[arm.arm]["result_paths"] = {
                m.row.id: list(arm.paths[m.row.id]) for m in kept if m.row.id in arm.paths
            }
    return {
        "query": request.query,
        "budget": request.budget,
        "terms": text.terms,
        "window": None
        if window is None
        else {
            "start": window.start.isoformat(),
            "end": window.end.isoformat(),
            "expression": text.expression if request.temporal_window is None else "",
            "source": "request" if request.temporal_window is not None else "query",
            # Facts inside rank first, undated next, outside last (engine/recall/window.py).
            "rule": "inside first, then undated, then outside",
            "moved": ranked.moved_by_window,
            "results": [{"id": m.row.id, "placement": placement(m.row, window)} for m in kept],
        },
        "arms": arm_trace,
        "fusion": {
            "method": "weighted_rrf",
            "k": config.rrf_k,
            "candidates": len(fused),
            "reranked": min(len(fused), profile.rerank_depth),
            "top": [
                {"id": f.unit_id, "score": f.score, "ranks": f.ranks} for f in fused[:TRACE_TOP]
            ],
        },
        "rerank": {
            "reranker": reranker_name,
            "token_vectors": {"cached": blobs.cached, "read": blobs.read},
            "weight": config.rerank_weight,
            "moved": ranked.moved_by_rerank,
            "elapsed_ms": round(ranked.rerank_ms, 3),
        },
        "scoring": {
            "recency_weight": config.recency_weight,
            "temporal_weight": config.temporal_weight,
            "proof_weight": config.proof_weight,
            # A question asking for a time raises dated facts (engine/dates/questions.py).
            "asks_time": text.asks_time,
            "dated_answer_weight": config.dated_answer_weight,
            "dropped_by_min_scores": ranked.dropped_by_floor,
        },
        "mmr": {"lambda": config.mmr_lambda, "moved": ranked.moved_by_mmr},
        "token_budget": {
            "max_tokens": request.max_tokens,
            "used": used,
            "results": len(kept),
            "skipped": len(ranked.memories) - len(kept),
        },
        "timings_ms": dict(timings_ms),
    }
