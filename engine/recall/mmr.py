"""Maximal marginal relevance: re-order candidates so near-duplicates do not crowd the top.

Greedy (Carbonell & Goldstein, 1998): repeatedly take
    argmax_d  λ·rel(d) − (1 − λ)·max_{s ∈ chosen} cos(d, s)
with rel min-max normalised to [0, 1] so λ means the same for every score scale.
λ = 1 keeps the relevance order; λ = 0 picks by novelty alone.

With `tiers`, the candidates of a lower tier are all taken before any of a higher one (the
engine's tiers: inside the query's window, undated, outside; then facts not yet known at the
query's time), so the greedy diversifies the order that is actually shown. Without them, a
candidate the tiers later move to the end could be picked early and push a near-duplicate of
the shown tier down: a local observation merged from two facts, known only since
consolidation ran, took the place of its own evidence that way (LoCoMo, docs/benchmarks.md
"Observations and the order MMR diversifies").
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from engine.recall.types import FloatMatrix


def mmr_order(
    relevance: Sequence[float],
    embeddings: FloatMatrix,
    lam: float,
    tiers: Sequence[int] | None = None,
) -> list[int]:
    """Indexes of all candidates in MMR order, tier by tier. `embeddings` rows must be unit
    vectors."""
    n = len(relevance)
    if n == 0:
        return []
    if not 0.0 <= lam <= 1.0:
        raise ValueError(f"mmr lambda must be in [0, 1], got {lam}")
    rel = np.asarray(relevance, dtype=np.float64)
    spread = float(rel.max() - rel.min())
    rel = (rel - rel.min()) / spread if spread > 0 else np.ones(n)
    tier = np.zeros(n, dtype=np.int64) if tiers is None else np.asarray(tiers, dtype=np.int64)
    if lam >= 1.0:
        return sorted(range(n), key=lambda i: (int(tier[i]), -rel[i], i))
    vectors = np.asarray(embeddings, dtype=np.float32)
    similarity = vectors @ vectors.T
    chosen: list[int] = []
    remaining = np.ones(n, dtype=bool)
    max_sim = np.full(n, -np.inf)
    for _ in range(n):
        redundancy = np.where(np.isfinite(max_sim), max_sim, 0.0)
        gain = lam * rel - (1.0 - lam) * redundancy
        gain[~remaining] = -np.inf
        gain[tier != tier[remaining].min()] = -np.inf
        pick = int(np.argmax(gain))  # first maximum: ties go to the more relevant/earlier
        chosen.append(pick)
        remaining[pick] = False
        max_sim = np.maximum(max_sim, similarity[pick])
    return chosen
