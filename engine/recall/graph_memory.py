"""A bank's graph in memory: the graph arm's hops computed in Python, with no statement.

The same edges, limits, orders and scores as the statements of engine/recall/graph_sql.py,
over arrays read once per bank (engine/recall/graph_cache.py):
- facts in id order (index i is the i-th id, so "ORDER BY unit_id" is ascending index), their
  embedding (halfvec, so float16 exactly as stored), type, lifecycle state and tags;
- per fact its links, both directions merged, heaviest first (ties by the other fact's id),
  cut to the largest fanout a budget uses (a hop reads the first `fanout` of them);
- entities (id order) with their mention count, names and aliases, and their facts by id;
- the bank's walkable terms (document frequency 2 ..`max_term_df`, not a number) with their
  rank in the database's collation (a hop breaks ties by term text as PostgreSQL sorts it);
- for the temporal arm (temporal_memory.py), each fact's dates and its temporal links.

Similarity is pgvector's halfvec cosine (float32 sums of float16 values, divided in double)
but for the dot product, which is summed in double here: every product of two float16 values
is a multiple of 2^-48 and, for the unit vectors stored, every partial sum lies within ±1
(Cauchy–Schwarz), so the double sum is exact in any order. A fact's similarity is then the
same whatever batch it is computed in, so the graph arm's scores do not depend on which of
its two concurrent walks reached a fact last (float32 products gave a fact last-bit
differences with its batch). It can differ from the statement's in its 7th digit, which only
matters between two facts exactly as similar to the query.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np
from numpy.typing import NDArray

from engine.recall.filters import visible_states
from engine.recall.graph_types import GraphWork, Step
from engine.recall.postings import Postings
from engine.recall.timeline import Timeline
from engine.recall.types import FACT_TYPES, FloatVector, RecallRequest
from engine.store.memories import TagsMatch

LINK_TYPES = ("semantic", "temporal", "entity", "causal")
# PostgreSQL counts timestamptz in microseconds from here (`timestamptz_send`).
PG_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
STATES = ("active", "archived", "superseded")
Int32s = NDArray[np.int32]


@dataclass(frozen=True)
class Csr:
    """Rows of ints: row r is values[starts[r]:starts[r + 1]]."""

    starts: Int32s
    values: Int32s

    def row(self, r: int) -> Int32s:
        return self.values[self.starts[r] : self.starts[r + 1]]

    @property
    def nbytes(self) -> int:
        return int(self.starts.nbytes + self.values.nbytes)


def csr_of(rows: Sequence[bytes]) -> Csr:
    """From rows of big-endian int4s (as PostgreSQL's `int4send` writes them)."""
    starts = np.zeros(len(rows) + 1, dtype=np.int32)
    np.cumsum([len(r) // 4 for r in rows], out=starts[1:])
    values = np.frombuffer(b"".join(rows), dtype=">i4").astype(np.int32)
    return Csr(starts, values)


def invert(rows: Csr, size: int) -> Csr:
    """Column → rows (ascending), for `size` columns."""
    owners = np.repeat(np.arange(len(rows.starts) - 1, dtype=np.int32), np.diff(rows.starts))
    order = np.argsort(rows.values, kind="stable")
    starts = np.zeros(size + 1, dtype=np.int32)
    np.cumsum(np.bincount(rows.values, minlength=size), out=starts[1:])
    return Csr(starts, owners[order])


@dataclass(frozen=True)
class Facts:
    ids: list[str]
    index: Mapping[str, int]
    embeddings: NDArray[np.float16]
    squares: NDArray[np.float32]  # per fact, the sum of its squared components (float32)
    types: NDArray[np.int8]  # index into FACT_TYPES
    states: NDArray[np.int8]  # index into STATES
    tags: Mapping[int, frozenset[str]]  # tagged facts only


@dataclass(frozen=True)
class Links:
    starts: Int32s  # per fact, into the arrays below
    other: Int32s
    weight: NDArray[np.float32]
    kind: NDArray[np.int8]  # index into LINK_TYPES


def instant(moment: datetime) -> int:
    """`moment` as PostgreSQL stores a timestamptz: microseconds since PG_EPOCH."""
    return (moment - PG_EPOCH) // timedelta(microseconds=1)


@dataclass(frozen=True)
class Dates:
    """Per fact, what the temporal arm's window reads (engine/recall/temporal.py), in
    microseconds since 2000-01-01 UTC, PostgreSQL's own count (`timestamptz_send`), so a
    comparison here is the statement's comparison. 0 where `dated` / `mentioned` is False."""

    start: NDArray[np.int64]  # occurred_start
    end: NDArray[np.int64]  # coalesce(occurred_end, occurred_start)
    mentioned_at: NDArray[np.int64]
    dated: NDArray[np.bool_]  # occurred_start is set
    mentioned: NDArray[np.bool_]  # mentioned_at is set

    @property
    def nbytes(self) -> int:
        return int(
            self.start.nbytes
            + self.end.nbytes
            + self.mentioned_at.nbytes
            + self.dated.nbytes
            + self.mentioned.nbytes
        )


@dataclass(frozen=True)
class TemporalLinks:
    """Per fact its temporal links only, both directions, heaviest first (ties by the other
    fact's id), cut to the widest budget's fanout: the temporal arm's spread. The merged
    `Links` cannot serve it: a fact's temporal links are rarely among its heaviest."""

    starts: Int32s
    other: Int32s
    weight: NDArray[np.float32]

    @property
    def nbytes(self) -> int:
        return int(self.starts.nbytes + self.other.nbytes + self.weight.nbytes)


@dataclass(frozen=True)
class Entities:
    ids: list[str]
    names: list[str]
    mentions: Int32s
    order: Int32s  # 0..n-1: entities are in id order
    units: Csr  # entity → facts (ascending)
    of_fact: Csr  # fact → entities
    by_name: Mapping[str, tuple[int, ...]]  # normalized name or alias → entities


@dataclass(frozen=True)
class Terms:
    names: list[str]
    df: Int32s
    collation: Int32s  # rank of the term in the database's text order
    units: Csr
    of_fact: Csr


@dataclass(frozen=True)
class Snapshot:
    """The database snapshot the graph was read in, and what the walk's formulas need."""

    snapshot: str
    xmin: str
    unit_count: float
    started: float  # time.monotonic() before the snapshot was taken


@dataclass(frozen=True)
class Visible:
    """The request's filters over cached facts (engine/recall/filters.py's rules)."""

    types: frozenset[int]
    states: frozenset[int]
    tags: frozenset[str]
    tags_match: TagsMatch


def visible_for(request: RecallRequest) -> Visible:
    return Visible(
        frozenset(FACT_TYPES.index(t) for t in (request.types or FACT_TYPES)),
        frozenset(STATES.index(s) for s in visible_states(request)),
        frozenset(request.tags),
        request.tags_match,
    )


def tags_pass(tags: frozenset[str], wanted: frozenset[str], match: TagsMatch) -> bool:
    """engine/store/memories.py tags_clause, in Python."""
    if not wanted:
        return True
    if match == "any":
        return not tags or bool(tags & wanted)
    if match == "all":
        return not tags or wanted <= tags
    if match == "any_strict":
        return bool(tags & wanted)
    if match == "all_strict":
        return wanted <= tags
    return tags == wanted


@dataclass(frozen=True)
class BankGraph:
    bank_id: str
    read: Snapshot
    facts: Facts
    links: Links
    entities: Entities
    terms: Terms
    dates: Dates
    temporal: TemporalLinks
    nbytes: int
    postings: Postings  # the keyword arm's index (engine/recall/keyword_memory.py)
    timeline: Timeline  # the rerank's context (engine/recall/context_memory.py)

    def specificity(self, count: float) -> float:
        n = self.read.unit_count
        return math.log((n + 1) / (count + 0.5)) / math.log(n + 2)

    def named(
        self, request: RecallRequest, vector: FloatVector, keys: Sequence[str], work: GraphWork
    ) -> list[Step]:
        """graph_sql.named_sql over the cache."""
        if not keys or work.max_entities <= 0:
            return []
        entities = self.entities
        found = {e for key in keys for e in entities.by_name.get(key, ())}
        named = sorted(
            (
                (self.specificity(float(entities.mentions[e])), entities.ids[e], e)
                for e in found
                if entities.mentions[e] <= work.max_entity_mentions
            ),
            key=lambda x: (-x[0], x[1]),
        )[: work.max_entities]
        query = FactQuery(self, vector, visible_for(request))
        scans = [entities.units.row(e)[: work.entity_scan].tolist() for _, _, e in named]
        steps: list[Step] = []
        for (specificity, _, e), nearest in zip(
            named, query.nearest_each(scans, work.fanout), strict=True
        ):
            for unit, similarity in nearest:
                steps.append(
                    Step(
                        self.facts.ids[unit],
                        None,
                        f"entity:{entities.names[e]}",
                        "entity_named",
                        work.named_weight * specificity,
                        similarity,
                    )
                )
        return steps

    def hop(
        self,
        request: RecallRequest,
        vector: FloatVector,
        frontier: Mapping[str, float],
        visited: Set[str],
        work: GraphWork,
    ) -> list[Step]:
        """graph_sql.hop_sql over the cache: links, shared entities, shared rare terms."""
        index = self.facts.index
        front = [(index[u], w, u) for u, w in frontier.items() if u in index]
        seen = {index[u] for u in visited if u in index}
        query = FactQuery(self, vector, visible_for(request))
        steps = self._links(front, seen, query, work.fanout)
        kinds = work.type_weights
        if kinds.get("entity_shared", 1.0) > 0 and work.max_entities > 0:
            steps += self._shared(
                front, seen, query, work, self.entities.of_fact, self.entities.units, "entity"
            )
        if kinds.get("term_shared", 1.0) > 0 and work.max_terms > 0:
            steps += self._shared(
                front, seen, query, work, self.terms.of_fact, self.terms.units, "term"
            )
        return steps

    def _links(
        self, front: list[tuple[int, float, str]], seen: set[int], query: FactQuery, fanout: int
    ) -> list[Step]:
        """Each frontier fact's first `fanout` links, visible and not yet visited, in frontier
        order: gathered for the whole frontier at once (one mask, one product)."""
        if not front:
            return []
        links = self.links
        rows = np.fromiter((i for i, _, _ in front), dtype=np.int64, count=len(front))
        starts = links.starts[rows].astype(np.int64)
        lengths = np.minimum(links.starts[rows + 1] - starts, fanout)
        owners = np.repeat(np.arange(len(front)), lengths)
        # Position of every link read: its row's start plus its place in the row.
        positions = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths) + np.arange(
            int(lengths.sum())
        )
        others = links.other[positions]
        keep = query.visible(others)
        if seen:
            keep &= ~np.isin(others, np.fromiter(seen, dtype=np.int32, count=len(seen)))
        kept = np.flatnonzero(keep)
        owners, positions, units = owners[kept], positions[kept], others[kept].tolist()
        # A frontier weight times a link weight, in double as `w * weight` in Python.
        weights = np.fromiter((w for _, w, _ in front), dtype=np.float64, count=len(front))
        strengths = (weights[owners] * links.weight[positions].astype(np.float64)).tolist()
        ids = self.facts.ids
        return [
            Step(
                ids[unit], front[owner][2], LINK_TYPES[kind], LINK_TYPES[kind], strength, similarity
            )
            for unit, owner, kind, strength, similarity in zip(
                units,
                owners.tolist(),
                links.kind[positions].tolist(),
                strengths,
                query.similarities(units),
                strict=True,
            )
        ]

    def _shared(
        self,
        front: list[tuple[int, float, str]],
        seen: set[int],
        query: FactQuery,
        work: GraphWork,
        of_fact: Csr,
        units: Csr,
        what: str,
    ) -> list[Step]:
        """Entities or terms shared with the frontier: the most weighty × specific first,
        each scanning its first facts by id (its share, at least `fanout`), the `fanout`
        most similar to the query kept."""
        best: dict[int, tuple[float, str]] = {}
        for i, w, source in front:
            for x in of_fact.row(i).tolist():
                if what == "entity" and self.entities.mentions[x] > work.max_entity_mentions:
                    continue
                held = best.get(x)
                if held is None or w > held[0] or (w == held[0] and source < held[1]):
                    best[x] = (w, source)
        # Ties by entity id, or by term in the database's collation.
        if what == "entity":
            count, limit, scan = self.entities.mentions, work.max_entities, work.entity_scan
            names, order = self.entities.names, self.entities.order
        else:
            count, limit, scan = self.terms.df, work.max_terms, work.term_scan
            names, order = self.terms.names, self.terms.collation
        ranked = sorted(
            ((best[x][0] * self.specificity(float(count[x])), int(order[x]), x) for x in best),
            key=lambda r: (-r[0], r[1]),
        )[:limit]
        scans: list[list[int]] = []
        for _, _, x in ranked:
            wanted = max(work.fanout, math.ceil(scan * self.specificity(float(count[x]))))
            # Facts already visited are skipped before the scan's limit, as in SQL.
            head = units.row(x)[: wanted + len(seen)].tolist()
            scans.append([u for u in head if u not in seen][:wanted])
        steps: list[Step] = []
        for (_, _, x), nearest in zip(ranked, query.nearest_each(scans, work.fanout), strict=True):
            w, source = best[x]
            specificity = self.specificity(float(count[x]))
            for unit, similarity in nearest:
                steps.append(
                    Step(
                        self.facts.ids[unit],
                        source,
                        f"{what}:{names[x]}",
                        f"{what}_shared",
                        w * specificity,
                        similarity,
                    )
                )
        return steps


class FactQuery:
    """One request's filters and query vector over a cached bank."""

    def __init__(self, graph: BankGraph, vector: FloatVector, visible: Visible) -> None:
        self._facts = graph.facts
        self._visible = visible
        # The statement binds the query as halfvec too (engine/db.py's codec).
        half = np.asarray(vector, dtype=np.float16)
        self._vector = half.astype(np.float64)  # exact: see the module's docstring
        rounded = half.astype(np.float32)
        self._square = float(np.dot(rounded, rounded))
        # Lookup tables by code: is this fact type / state visible? (np.isin on these tiny
        # arrays cost ~50 µs a call, five calls a recall.)
        self._types: NDArray[np.bool_] = np.array(
            [t in visible.types for t in range(len(FACT_TYPES))], dtype=np.bool_
        )
        self._states: NDArray[np.bool_] = np.array(
            [s in visible.states for s in range(len(STATES))], dtype=np.bool_
        )

    def visible(self, units: Int32s) -> NDArray[np.bool_]:
        """Which of `units` the request's filters let through."""
        facts, visible = self._facts, self._visible
        mask = self._types[facts.types[units]] & self._states[facts.states[units]]
        if visible.tags:
            for n, unit in enumerate(units.tolist()):
                if mask[n]:
                    tags = facts.tags.get(unit, frozenset())
                    mask[n] = tags_pass(tags, visible.tags, visible.tags_match)
        return mask

    def distances(self, units: NDArray[np.int64] | Int32s) -> NDArray[np.float64]:
        """pgvector's cosine distance (`<=>`) of each of `units` to the query."""
        dots = self._facts.embeddings[units].astype(np.float64) @ self._vector
        norms = np.sqrt(self._facts.squares[units].astype(np.float64) * self._square)
        distances: NDArray[np.float64] = 1 - np.clip(dots / norms, -1.0, 1.0)
        return distances

    def similarities(self, units: Sequence[int]) -> list[float]:
        if not units:
            return []
        # 1 - distance, as the statement computes it
        result: list[float] = (1 - self.distances(np.asarray(units, dtype=np.int64))).tolist()
        return result

    def nearest_each(
        self, scans: Sequence[Sequence[int]], limit: int
    ) -> list[list[tuple[int, float]]]:
        """Per scan, its visible facts most similar first, at most `limit` (one product
        for all the scans of a hop)."""
        flat = np.fromiter((u for s in scans for u in s), dtype=np.int32)
        if not len(flat):
            return [[] for _ in scans]
        visible = self.visible(flat)
        similarities = np.asarray(self.similarities(flat.tolist()))
        out: list[list[tuple[int, float]]] = []
        start = 0
        for scan in scans:
            end = start + len(scan)
            kept = np.flatnonzero(visible[start:end]) + start
            order = kept[np.argsort(-similarities[kept], kind="stable")[:limit]].tolist()
            out.append([(int(flat[i]), float(similarities[i])) for i in order])
            start = end
        return out
