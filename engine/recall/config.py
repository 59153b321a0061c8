"""Recall's tuning knobs, in one frozen record; the defaults are the measured choices.

Every figure quoted here is recall@10 over LoCoMo categories 1-4 on conversations 1-5 (the
tuning half; 1,000 questions), facts from the local extractor, the shared protocol of
`../shared/data/locomo/README.md`. Conversations 6-10 were not used to choose anything.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from engine.errors import ConfigurationError
from engine.recall.types import ArmName, Budget


@dataclass(frozen=True)
class BudgetProfile:
    """How much work one recall may do: candidates per arm, HNSW breadth, rerank depth."""

    arm_limit: int  # candidates each arm returns
    ef_search: int  # hnsw.ef_search for the semantic and temporal scans
    rerank_depth: int  # fused candidates read from the database and reranked
    graph_seeds: int  # best candidates of the other arms the graph expands from
    graph_fanout: int  # neighbours fetched per seed and per shared entity


BUDGETS: Mapping[Budget, BudgetProfile] = MappingProxyType(
    {
        "low": BudgetProfile(
            arm_limit=30, ef_search=40, rerank_depth=40, graph_seeds=4, graph_fanout=8
        ),
        "mid": BudgetProfile(
            arm_limit=60, ef_search=80, rerank_depth=80, graph_seeds=6, graph_fanout=12
        ),
        "high": BudgetProfile(
            arm_limit=120, ef_search=160, rerank_depth=160, graph_seeds=10, graph_fanout=20
        ),
    }
)


def _weights() -> Mapping[ArmName, float]:
    return MappingProxyType({"semantic": 1.0, "keyword": 1.0, "graph": 0.5, "temporal": 1.0})


def _caps() -> Mapping[ArmName, int]:
    return MappingProxyType({"semantic": 1000, "keyword": 1000, "graph": 1000, "temporal": 1000})


def _reserve() -> Mapping[ArmName, int]:
    return MappingProxyType({"semantic": 0, "keyword": 0, "graph": 3, "temporal": 5})


@dataclass(frozen=True)
class RecallConfig:
    # Weighted reciprocal-rank fusion: fused(d) = Σ_arm w_arm / (rrf_k + rank_arm(d)) over the
    # arm's first cap_arm ranks.
    rrf_k: int = 60
    weights: Mapping[ArmName, float] = field(default_factory=_weights)
    caps: Mapping[ArmName, int] = field(default_factory=_caps)
    # Each arm's first `reserve` hits are reranked even when fusion ranks them lower.
    reserve: Mapping[ArmName, int] = field(default_factory=_reserve)
    # Semantic hits below this cosine similarity are noise for MiniLM.
    similarity_floor: float = 0.1
    # final = rerank_weight * reranker + (1 - rerank_weight) * fused, both min-max normalised
    # over the reranked candidates.
    rerank_weight: float = 1.0
    # MaxSim's share of the fact-in-context score, and how many neighbours make the context
    # (engine/recall/rerank.py).
    context_weight: float = 0.3
    context_neighbours: int = 4
    # Boosts added to the normalised base score, each term in [0, 1].
    recency_weight: float = 0.0
    recency_half_life_days: float = 180.0
    temporal_weight: float = 0.5
    proof_weight: float = 0.0
    observation_boost: float = 0.2  # with prefer_observations
    # MMR: λ·relevance − (1 − λ)·max similarity to what is already chosen; 1 = no diversity.
    mmr_lambda: float = 0.6
    # Graph: how much each stored link type counts, and entities above this many mentions are
    # not expanded (their weight 1/ln(e + n) is negligible and their fan-out is not).
    link_type_weights: Mapping[str, float] = field(
        default_factory=lambda: MappingProxyType(
            {
                "semantic": 1.0,
                "entity": 1.0,
                "temporal": 0.5,
                "causal": 1.0,
                "entity_shared": 1.0,
            }
        )
    )
    max_entity_mentions: int = 5000
    graph_similarity_weight: float = 0.5
    # Temporal arm: in-window hits whose temporal-link neighbours are added, and their decay.
    temporal_spread_seeds: int = 5
    temporal_spread_decay: float = 0.5

    def __post_init__(self) -> None:
        for name in ("mmr_lambda", "rerank_weight", "context_weight"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ConfigurationError(f"recall {name} must be between 0 and 1, got {value}")

    def budget(self, name: Budget) -> BudgetProfile:
        return BUDGETS[name]
