"""Graph arm: walk from the query's entities and the other arms' best facts, hop by hop.

Seeds. The facts of the entities the query names (engine/recall/names.py; looked up as soon
as the query is embedded, beside the other arms), each entity weighted
`named_weight × specificity`, and the top few hits of the semantic, keyword and temporal arms,
each weighted 1 / (1 + rank) by its best rank.

Hops. Each hop expands a frontier of facts along three kinds of edge, in one statement
(engine/recall/graph_sql.py):
    w_s · link_weight                         stored memory_links, both ways
    w_s · specificity(e)  per shared entity   unit_entities
    w_s · specificity(t)  per shared rare term memory_terms (a word the extractor did not
                                              name, "cluster", joins facts like a name)
times the edge kind's weight (config `link_type_weights`). A fact's strength is that of its
strongest path, the product of the path's edges, so it only decays with every hop and is
never more than its seed's weight: summing paths instead let a clique (a user's thirty facts
of one day, all linked to each other by meaning, time and name) grow stronger with every hop
than the one fact a rare name leads to. After a hop, the `frontier` facts it reached most
strongly (scaled by query similarity, below), not yet expanded, are the next frontier;
the budget sets the hops: from the named entities `hops` (low 1, mid 2, high 3), from the
other arms' seeds `seed_hops` (low 1, mid 1, high 3; below). Temporal links score a fact but do not
carry the walk on (`walk_kinds`): in a bank whose facts share a day every fact links to
every other.

Score. strength × (1 − β + β·max(0, cos(n, query))): a linked on-topic fact beats an
equally linked off-topic one, but a second hop, which by nature says something the query
does not, is not scored out of existence (β = 0.5). Facts the other arms already found are
left out of the arm's list (they still carry the walk): the graph's job is to reach what
they missed, and its best new finds are guaranteed a place in the rerank (config `reserve`).
Every fact reached, hit or not, keeps its strongest path for the trace.

Round trips. Two walks share the scores: one from the named entities (one lookup statement,
then its hops), which runs beside the other arms, and one from their seeds once they are in.
Each hop is one statement for its three kinds of edge (three statements at once on three
connections cost three plans and three round trips for one frontier: bench/recall_profile.py,
docs/benchmarks.md "Sixth pass"), so with the mid budget the arm adds one round trip after
the other arms. The seeds' walk takes one hop at mid: its second hop was one of the arm's
four hop statements (~3,000 buffers at 100k facts) and a serial round trip after the other
arms, for facts two steps from what they already found; a chain through an entity the query
names keeps its two hops (tests/recall/test_recall_depth.py). LoCoMo, docs/benchmarks.md
"Eighth pass". In the server none of these statements is sent while the bank's graph is held
in memory (engine/recall/graph_cache.py): the same hops run in the thread pool over it
(graph_memory.py), PostgreSQL CPU per recall −42% at 100k facts ("Tenth pass").

Work is bounded per hop: `fanout` links per frontier fact; at most `max_entities` entities
and `max_terms` terms expanded (largest frontier weight × specificity first), entities above
`max_entity_mentions` mentions and terms above `max_term_df` facts never; each reads at most
`entity_scan` / `term_scan` of its facts times its specificity (a popular one little) and
keeps the `fanout` most similar to the query. With the mid budget that is at most
8 × 12 links + 8 × 96 mentions + 8 × 64 postings per hop, three hops. (Measured at 14.5k synthetic
facts before multi-hop, bench/recall_latency.py: unbounded entity expansion meant 8,454
memory_units reads and 110-160 ms per query.)
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence, Set
from concurrent.futures import Executor

import asyncpg
from pgvector import Vector

from engine.db import Pool
from engine.recall.filters import filter_args, visible_states
from engine.recall.graph_memory import BankGraph
from engine.recall.graph_sql import hop_sql, named_sql
from engine.recall.graph_types import GraphWork, Step, graph_work
from engine.recall.types import ArmHit, ArmResult, FloatVector, RecallRequest

__all__ = ["GraphWalk", "GraphWork", "Step", "graph_work", "named_steps"]


def _steps(records: Sequence[asyncpg.Record]) -> list[Step]:
    return [
        Step(r["id"], r["source"], r["label"], r["kind"], r["strength"], r["similarity"])
        for r in records
    ]


async def _fetch(pool: Pool, sql: str, *args: object) -> list[asyncpg.Record]:
    async with pool.acquire() as conn:
        return await conn.fetch(sql, *args)


async def named_steps(
    pool: Pool, request: RecallRequest, vector: FloatVector, keys: Sequence[str], work: GraphWork
) -> list[Step]:
    """The facts of the entities the query names (one statement; none without keys)."""
    if not keys or work.max_entities <= 0:
        return []
    sql = named_sql(request.tags_match, visible_states(request))
    rows = await _fetch(
        pool,
        sql,
        *filter_args(request),
        list(keys),
        work.named_weight,
        work.fanout,
        Vector(vector),
        work.max_entity_mentions,
        work.max_entities,
        work.entity_scan,
    )
    return _steps(rows)


class GraphWalk:
    """One recall's walk: strength, similarity and best path of every fact reached. Two
    walks share it, one from the query's entities (started beside the other arms) and one
    from the other arms' seeds. With the bank's graph in memory (engine/recall/graph_cache.py)
    the hops are computed in the thread pool, with no statement."""

    def __init__(
        self,
        pool: Pool,
        request: RecallRequest,
        vector: FloatVector,
        work: GraphWork,
        cached: tuple[BankGraph, Executor] | None = None,
    ) -> None:
        self._pool = pool
        self._cached = cached
        self._request = request
        self._vector = vector
        self._query = Vector(vector)
        self.work = work
        self.strength: dict[str, float] = {}
        self.similarity: dict[str, float] = {}
        self.paths: dict[str, tuple[str, ...]] = {}
        self._started = time.perf_counter()
        self._names: list[str] = []
        self._reached: dict[str, list[int]] = {}

    async def from_names(self, keys: Sequence[str]) -> None:
        if self._cached is None:
            named = await named_steps(self._pool, self._request, self._vector, keys, self.work)
        else:
            graph, cpu = self._cached
            named = await asyncio.get_running_loop().run_in_executor(
                cpu, graph.named, self._request, self._vector, keys, self.work
            )
        self._names = sorted({s.label.removeprefix("entity:") for s in named})
        carried: dict[str, tuple[str, ...]] = {}
        frontier = self._next(self._absorb(named, carried), frozenset())
        await self._walk("named", frontier, self.work.hops, carried)

    async def from_seeds(self, seeds: Sequence[tuple[str, float]]) -> None:
        carried: dict[str, tuple[str, ...]] = {unit_id: ("seed", unit_id) for unit_id, _ in seeds}
        await self._walk("seeds", dict(seeds), self.work.seed_hops, carried)

    def result(
        self, seeds: Sequence[tuple[str, float]], exclude: Set[str], limit: int
    ) -> ArmResult:
        """Best first, ties by id; seeds and facts in `exclude` left out."""
        seed_ids = {unit_id for unit_id, _ in seeds}
        # Scored as tuples and made hits only for the `limit` kept: a walk reaches ~500 facts.
        beta = self.work.similarity_weight
        similarity = self.similarity
        scored = [
            (-(total * (1 - beta + beta * max(similarity.get(unit_id, 0.0), 0.0))), unit_id)
            for unit_id, total in self.strength.items()
            if unit_id not in exclude and unit_id not in seed_ids
        ]
        scored.sort()
        hits = [ArmHit(unit_id, -negative) for negative, unit_id in scored[:limit]]
        note = f"{len(seeds)} seeds, named entities {self._names}, steps per hop " + ", ".join(
            f"{walk} {counts}" for walk, counts in self._reached.items()
        )
        elapsed = (time.perf_counter() - self._started) * 1000
        return ArmResult("graph", hits, elapsed, note, dict(self.paths))

    async def _walk(
        self,
        name: str,
        frontier: dict[str, float],
        hops: int,
        carried: dict[str, tuple[str, ...]],
    ) -> None:
        visited = set(frontier)
        counts = self._reached.setdefault(name, [])
        for _ in range(hops):
            if not frontier:
                return
            steps = await self._hop(frontier, visited)
            counts.append(len(steps))
            frontier = self._next(self._absorb(steps, carried), visited)
            visited |= frontier.keys()

    async def _hop(self, frontier: dict[str, float], visited: Set[str]) -> list[Step]:
        if self._cached is None:
            return await _hop(self._pool, self._request, self._query, frontier, visited, self.work)
        graph, cpu = self._cached
        return await asyncio.get_running_loop().run_in_executor(
            cpu, graph.hop, self._request, self._vector, frontier, frozenset(visited), self.work
        )

    def _factor(self, unit_id: str) -> float:
        beta = self.work.similarity_weight
        return 1 - beta + beta * max(self.similarity.get(unit_id, 0.0), 0.0)

    def _absorb(
        self, steps: Sequence[Step], carried: dict[str, tuple[str, ...]]
    ) -> dict[str, float]:
        """Add one hop's steps; the strength each fact gained in it along edges that carry
        the walk on (a fact reached only by a temporal link is scored, not expanded: in a
        bank whose facts share a day every fact links to every other).

        A step's path is the one its source was reached by in this walk (`carried`: the
        path behind the weight the source carries), not the source's best path overall,
        which the other walk may change at any moment: so a fact's path is the one its
        strength came from, and the same whichever walk's hop finishes first. Equal
        strengths keep the path that sorts first, in `carried` as in `paths`, so the paths
        do not depend on the order of a hop's steps either (a statement's rows come in the
        order its plan makes them: no ORDER BY)."""
        gained: dict[str, float] = {}
        weights, walk_kinds = self.work.type_weights, self.work.walk_kinds
        strength, similarity, paths = self.strength, self.similarity, self.paths
        for step in steps:
            value = step.strength * weights.get(step.kind, 1.0)
            if value <= 0:
                continue
            unit_id = step.unit_id
            similarity[unit_id] = step.similarity
            held = gained.get(unit_id, 0.0)
            walks = step.kind in walk_kinds and value >= held
            best = strength.get(unit_id, 0.0)
            if not walks and value < best:
                continue  # neither carries the walk nor beats the best path: no path built
            before = carried.get(step.source, ("seed", step.source)) if step.source else ()
            path = (*before, step.label, unit_id)
            # value == held > 0: this hop already carries the fact on, by `carried[unit_id]`
            if walks and (value > held or path < carried[unit_id]):
                gained[unit_id] = value
                carried[unit_id] = path
            if value > best or (value == best and path < paths[unit_id]):
                strength[unit_id] = value
                paths[unit_id] = path
        return gained

    def _next(self, gained: Mapping[str, float], skip: Set[str]) -> dict[str, float]:
        """The next frontier: the facts that gained most in a hop (query-similar first),
        not expanded before, each weighted by what it gained."""
        ranked = sorted(
            (u for u in gained if u not in skip),
            key=lambda u: (-gained[u] * self._factor(u), u),
        )
        return {u: gained[u] for u in ranked[: self.work.frontier]}


async def _hop(
    pool: Pool,
    request: RecallRequest,
    query: Vector,
    frontier: Mapping[str, float],
    visited: Set[str],
    work: GraphWork,
) -> list[Step]:
    kinds = work.type_weights
    entities = work.max_entities if kinds.get("entity_shared", 1.0) > 0 else 0
    terms = work.max_terms if kinds.get("term_shared", 1.0) > 0 else 0
    rows = await _fetch(
        pool,
        hop_sql(request.tags_match, visible_states(request)),
        *filter_args(request),
        list(frontier),
        list(frontier.values()),
        work.fanout,
        query,
        list(visited),
        work.max_entity_mentions,
        entities,
        work.entity_scan,
        work.max_term_df,
        terms,
        work.term_scan,
    )
    return _steps(rows)
