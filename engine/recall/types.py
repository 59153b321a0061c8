"""What recall takes and returns, as typed records (the HTTP layer maps them to the wire)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from engine.store.memories import TagsMatch
from engine.types import FactType

Budget = Literal["low", "mid", "high"]
ArmName = Literal["semantic", "keyword", "graph", "temporal"]
ARMS: tuple[ArmName, ...] = ("semantic", "keyword", "graph", "temporal")
FACT_TYPES: tuple[FactType, ...] = ("world", "experience", "observation")

FloatVector = NDArray[np.float32]
FloatMatrix = NDArray[np.float32]


@dataclass(frozen=True)
class TimeWindow:
    """A half-open instant range `[start, end)`."""

    start: datetime
    end: datetime


@dataclass(frozen=True)
class MinScores:
    """Per-stage floors; a result below any set floor is dropped."""

    semantic: float | None = None
    keyword: float | None = None
    reranker: float | None = None
    final: float | None = None


@dataclass(frozen=True)
class RankingBoosts:
    """Per-bank weights of the lifecycle's ranking boosts (engine/recall/scoring.py); 0 is
    off, the default of every preset (engine/lifecycle/policy.py)."""

    strength: float = 0.0
    importance: float = 0.0
    recency: float = 0.0


@dataclass(frozen=True)
class RecallRequest:
    bank_id: str
    query: str
    types: tuple[FactType, ...] = ()  # empty: every type
    budget: Budget = "mid"
    max_tokens: int = 4096
    query_timestamp: datetime | None = None  # the "now" of relative dates; None: now
    # Not a filter: facts inside it are ranked first (engine/recall/window.py).
    temporal_window: TimeWindow | None = None
    tags: tuple[str, ...] = ()
    tags_match: TagsMatch = "any"
    include_entities: bool = True
    entities_max_tokens: int = 500
    include_chunks: bool = False
    chunks_max_tokens: int = 8192
    include_source_facts: bool = False
    source_facts_max_tokens: int = 4096
    prefer_observations: bool = False
    min_scores: MinScores = field(default_factory=MinScores)
    trace: bool = False
    # The lifecycle (docs/lifecycle.md): archived and superseded facts are left out unless
    # asked for; `as_of` answers with the facts valid then, as known then.
    include_archived: bool = False
    include_superseded: bool = False
    as_of: datetime | None = None
    boosts: RankingBoosts = field(default_factory=RankingBoosts)


@dataclass(frozen=True)
class ArmHit:
    """One candidate of one arm; the arm's list is in rank order (best first)."""

    unit_id: str
    score: float


@dataclass(frozen=True)
class ArmResult:
    arm: ArmName
    hits: list[ArmHit]
    elapsed_ms: float
    note: str = ""  # why an arm did not run, or what it searched ("window 1-8 May 2023")
    # The graph arm's way to each fact it reached: ("entity:Alice", id, "term:cluster", id, ...), or
    # ("seed", seed id, label, id, ...) from another arm's fact.
    paths: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Fused:
    """A candidate after fusion: its fused score and every arm's rank (1-based) and score."""

    unit_id: str
    score: float
    ranks: dict[ArmName, int]
    scores: dict[ArmName, float]


@dataclass(frozen=True)
class CandidateRow:
    """What recall reads of a fact once fusion has picked it."""

    id: str
    fact_type: str
    text: str
    context: str
    occurred_start: datetime | None
    occurred_end: datetime | None
    mentioned_at: datetime | None
    document_id: str | None
    chunk_id: str | None
    metadata: dict[str, Any]
    tags: list[str]
    proof_count: int
    embedding: FloatVector
    token_vectors: bytes | None
    entities: list[str]
    # Token vectors of the facts next to this one in its document (its context), when read.
    context_vectors: tuple[bytes, ...] = ()
    # The ids of `entities`, in the same order (read with them).
    entity_ids: tuple[str, ...] = ()
    # The lifecycle: strength, importance, state and validity (docs/lifecycle.md).
    importance: float = 0.5
    strength: float = 0.5
    state: str = "active"
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    superseded_by: str | None = None
    known_at: datetime | None = None  # when the memory learnt it: mentioned, else stored


@dataclass(frozen=True)
class Scores:
    final: float
    semantic: float
    keyword: float | None
    reranker: float | None
    fused: float
    arms: dict[ArmName, float]
    ranks: dict[ArmName, int]


@dataclass(frozen=True)
class RecalledMemory:
    row: CandidateRow
    scores: Scores
    tokens: int


@dataclass(frozen=True)
class EntityState:
    entity_id: str
    canonical_name: str


@dataclass(frozen=True)
class ChunkText:
    chunk_id: str
    text: str
    chunk_index: int
    truncated: bool


@dataclass
class BlobCounts:
    """Token-vector blobs one fetch took from the cache and read from the database."""

    cached: int = 0
    read: int = 0


@dataclass(frozen=True)
class RecallResult:
    memories: list[RecalledMemory]
    entities: list[EntityState] | None = None
    chunks: list[ChunkText] | None = None
    trace: dict[str, Any] | None = None
    timings_ms: dict[str, float] = field(default_factory=dict)  # stage -> milliseconds
    arms: list[ArmResult] = field(default_factory=list)
    # With include_source_facts: each returned observation's supporting facts (ids, newest
    # evidence first), the facts themselves within the budget, and whether any were left out.
    source_fact_ids: dict[str, list[str]] = field(default_factory=dict)
    source_facts: list[CandidateRow] | None = None
    source_facts_truncated: bool = False
    # The rerank's token-vector blobs: how many the cache held and how many were read.
    token_vectors: BlobCounts | None = None


@dataclass(frozen=True)
class Ranked:
    """The CPU stage's output: candidates in final order with their scores."""

    memories: list[RecalledMemory]
    rerank_ms: float
    dropped_by_floor: int
    moved_by_rerank: int
    moved_by_mmr: int
    moved_by_window: int  # positions changed by putting the window's facts first
