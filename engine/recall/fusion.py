"""Weighted reciprocal-rank fusion with per-arm caps.

    fused(d) = Σ_arm  w_arm / (k + rank_arm(d))    over ranks 1..cap_arm of each arm

Ranks, not scores, are fused: cosine similarities, BM25 sums and graph strengths live on
unrelated scales. Weights and caps let an arm contribute only where it has been measured to
help (see engine/recall/config.py); an arm with weight 0 still shows in the trace.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from engine.recall.types import ArmName, ArmResult, Fused


def fuse_rrf(
    arms: Sequence[ArmResult],
    *,
    k: int,
    weights: Mapping[ArmName, float],
    caps: Mapping[ArmName, int],
) -> list[Fused]:
    """Candidates of every arm, best fused score first (ties by id, so the order is stable);
    a candidate only weight-0 arms or ranks past the caps found scores 0 and comes last."""
    score: dict[str, float] = {}
    ranks: dict[str, dict[ArmName, int]] = {}
    arm_scores: dict[str, dict[ArmName, float]] = {}
    for arm in arms:
        weight = weights.get(arm.arm, 0.0)
        cap = caps.get(arm.arm, len(arm.hits))
        for rank, hit in enumerate(arm.hits, start=1):
            ranks.setdefault(hit.unit_id, {})[arm.arm] = rank
            arm_scores.setdefault(hit.unit_id, {})[arm.arm] = hit.score
            contribution = weight / (k + rank) if rank <= cap else 0.0
            score[hit.unit_id] = score.get(hit.unit_id, 0.0) + contribution
    fused = [Fused(uid, score[uid], ranks[uid], arm_scores[uid]) for uid in score]
    fused.sort(key=lambda f: (-f.score, f.unit_id))
    return fused


def seeds_of(arms: Sequence[ArmResult], per_arm: int) -> list[tuple[str, float]]:
    """The graph's seeds: each arm's first `per_arm` hits, weighted 1 / (1 + best rank)."""
    best: dict[str, int] = {}
    for arm in arms:
        for rank, hit in enumerate(arm.hits[:per_arm], start=1):
            best[hit.unit_id] = min(best.get(hit.unit_id, rank), rank)
    ordered = sorted(best.items(), key=lambda item: (item[1], item[0]))
    return [(unit_id, 1.0 / (1 + rank)) for unit_id, rank in ordered]


def shortlist(
    fused: Sequence[Fused], arms: Sequence[ArmResult], depth: int, reserve: Mapping[ArmName, int]
) -> list[Fused]:
    """The candidates the reranker sees: the fused top `depth`, plus each arm's first
    `reserve[arm]` hits wherever fusion ranked them. A narrow arm (graph, temporal) thus gets
    its best finds in front of the reranker without its weight pushing others out of the
    fused order."""
    chosen = list(fused[:depth])
    seen = {f.unit_id for f in chosen}
    by_id = {f.unit_id: f for f in fused}
    for arm in arms:
        for hit in arm.hits[: reserve.get(arm.arm, 0)]:
            if hit.unit_id not in seen and hit.unit_id in by_id:
                chosen.append(by_id[hit.unit_id])
                seen.add(hit.unit_id)
    return chosen
