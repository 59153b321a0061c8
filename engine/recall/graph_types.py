"""What a graph walk is told (how far and wide it may go) and what each hop returns."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

from engine.recall.config import BudgetProfile, RecallConfig


@dataclass(frozen=True)
class GraphWork:
    """How far and how wide one walk may go."""

    hops: int
    seed_hops: int
    frontier: int
    fanout: int
    type_weights: Mapping[str, float]
    similarity_weight: float
    named_weight: float
    max_entity_mentions: int
    max_entities: int
    entity_scan: int
    max_terms: int
    max_term_df: int
    term_scan: int
    walk_kinds: frozenset[str]


def graph_work(config: RecallConfig, profile: BudgetProfile) -> GraphWork:
    return GraphWork(
        hops=profile.graph_hops,
        seed_hops=profile.graph_seed_hops,
        frontier=profile.graph_frontier,
        fanout=profile.graph_fanout,
        type_weights=config.link_type_weights,
        similarity_weight=config.graph_similarity_weight,
        named_weight=config.graph_named_weight,
        max_entity_mentions=config.max_entity_mentions,
        max_entities=config.graph_max_entities,
        entity_scan=config.graph_entity_scan,
        max_terms=config.graph_max_terms,
        max_term_df=config.graph_max_term_df,
        term_scan=config.graph_term_scan,
        walk_kinds=config.graph_walk_kinds,
    )


class Step(NamedTuple):
    """A fact reached: from `source` (None: a query-named entity) along `label`. A tuple:
    a walk makes ~1,000 of them, and a frozen dataclass was most of the in-memory hop's time."""

    unit_id: str
    source: str | None
    label: str
    kind: str
    strength: float
    similarity: float
