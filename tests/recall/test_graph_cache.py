"""The graph arm's walk over a bank's graph in memory (engine/recall/graph_cache.py): the same
steps as the SQL walk, and never served after a write changed what it holds."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence, Set
from concurrent.futures import ThreadPoolExecutor
from dataclasses import fields, replace

import httpx
import numpy as np

from engine.db import Pool
from engine.embedding import Embedder
from engine.lifecycle.access import AccessBuffer
from engine.lifecycle.supersession import Supersession, supersede
from engine.recall.candidates import fetch_rows
from engine.recall.config import RecallConfig
from engine.recall.graph import GraphWalk, graph_work
from engine.recall.graph_cache import ChangePruner, GraphCache, graph_cache_for
from engine.recall.graph_memory import BankGraph
from engine.recall.graph_sql import specificity_sql
from engine.recall.graph_types import GraphWork, Step
from engine.recall.names import name_keys
from engine.recall.query import embed_query
from engine.recall.types import (
    Budget,
    FloatVector,
    RecallRequest,
)
from recall.recall_support import BASE, QUERIES, Banks


async def _walk(
    pool: Pool,
    embedder: Embedder,
    request: RecallRequest,
    seeds: list[tuple[str, float]],
    cached: tuple[BankGraph, ThreadPoolExecutor] | None,
) -> GraphWalk:
    config = RecallConfig()
    vector = embed_query(embedder, request.query).vector
    walk = GraphWalk(
        pool, request, vector, graph_work(config, config.budget(request.budget)), cached
    )
    await walk.from_names(name_keys(request.query))
    await walk.from_seeds(seeds)
    return walk


async def test_the_cached_walk_takes_the_sql_walks_steps(
    recall_pool: Pool, embedder: Embedder, cpu: ThreadPoolExecutor, banks: Banks
) -> None:
    cache = graph_cache_for(RecallConfig(), recall_pool, cpu, 64 * 2**20)
    compared = 0
    for bank in (banks.depth, banks.main, banks.by_conversation):
        graph = await cache.read(bank)
        assert graph is not None
        async with recall_pool.acquire() as conn:
            ids = [
                r["id"]
                for r in await conn.fetch(
                    "SELECT id::text AS id FROM memory_units"
                    " WHERE bank_id = $1 ORDER BY id LIMIT 6",
                    bank,
                )
            ]
        seeds = [(unit, 1 / (2 + n)) for n, unit in enumerate(ids)]
        budgets: tuple[Budget, ...] = ("low", "mid", "high")
        for query in QUERIES:
            for budget in budgets:
                for request in (
                    RecallRequest(bank, query, budget=budget),
                    RecallRequest(bank, query, budget=budget, types=("world",)),
                    RecallRequest(bank, query, budget=budget, tags=("x",), tags_match="any_strict"),
                ):
                    sql = await _walk(recall_pool, embedder, request, seeds, None)
                    mem = await _walk(recall_pool, embedder, request, seeds, (graph, cpu))
                    assert sql.strength.keys() == mem.strength.keys(), (bank, query, budget)
                    for unit, strength in sql.strength.items():
                        assert math.isclose(mem.strength[unit], strength, rel_tol=1e-9)
                        assert math.isclose(
                            mem.similarity[unit], sql.similarity[unit], abs_tol=1e-5
                        )
                    assert mem.paths == sql.paths
                    compared += len(sql.strength)
    assert compared > 500  # the walks reached facts to compare
    await cache.close()


async def test_the_statements_weigh_an_entity_or_term_as_the_walk_in_memory_does(
    recall_pool: Pool, cpu: ThreadPoolExecutor, banks: Banks
) -> None:
    # Which entities and terms a hop expands is an ORDER BY on weight x specificity, ties by
    # id or term: a fact reached by a rare term then a common one ties with one reached the
    # other way round, so the two walks agree only if the products round alike. The
    # statement once computed (w * ln(a)) / ln(b), the walk in memory w * (ln(a) / ln(b)).
    cache = graph_cache_for(RecallConfig(), recall_pool, cpu, 64 * 2**20)
    graph = await cache.read(banks.main)
    assert graph is not None
    await cache.close()
    weights = np.random.default_rng(7).random(400).tolist()
    counts = [float(c) for c in range(1, 61)]
    pairs = [(w, c) for w in weights for c in counts]
    async with recall_pool.acquire() as conn:
        products = await conn.fetchval(
            f"SELECT array_agg(p.w * {specificity_sql('p.c')} ORDER BY p.i)"
            " FROM (SELECT $3::float8 AS n) bank,"
            " unnest($1::float8[], $2::float8[]) WITH ORDINALITY AS p(w, c, i)",
            [w for w, _ in pairs],
            [c for _, c in pairs],
            graph.read.unit_count,
        )
    differ = [
        (w, c) for (w, c), p in zip(pairs, products, strict=True) if p != w * graph.specificity(c)
    ]
    assert not differ, f"{len(differ)} of {len(pairs)} products differ, as {differ[0]}"


class _Reversed(BankGraph):
    """The same hops, their steps in the reverse order: a statement has no ORDER BY, so its
    rows come in whatever order its plan makes them."""

    def named(
        self, request: RecallRequest, vector: FloatVector, keys: Sequence[str], work: GraphWork
    ) -> list[Step]:
        return super().named(request, vector, keys, work)[::-1]

    def hop(
        self,
        request: RecallRequest,
        vector: FloatVector,
        frontier: Mapping[str, float],
        visited: Set[str],
        work: GraphWork,
    ) -> list[Step]:
        return super().hop(request, vector, frontier, visited, work)[::-1]


async def test_the_walks_paths_do_not_depend_on_the_order_of_a_hops_steps(
    recall_pool: Pool, embedder: Embedder, cpu: ThreadPoolExecutor, banks: Banks
) -> None:
    # Facts reached at equal strength through two entities or terms (two with the same count)
    # once carried on whichever path came first, and the facts they led to kept it.
    cache = graph_cache_for(RecallConfig(), recall_pool, cpu, 64 * 2**20)
    for bank in (banks.depth, banks.main, banks.by_conversation):
        graph = await cache.read(bank)
        assert graph is not None
        reversed_graph = _Reversed(**{f.name: getattr(graph, f.name) for f in fields(graph)})
        seeds = [(unit, 1 / (2 + n)) for n, unit in enumerate(sorted(graph.facts.ids)[:6])]
        for query in QUERIES:
            for budget in ("mid", "high"):
                request = RecallRequest(bank, query, budget=budget)
                walk = await _walk(recall_pool, embedder, request, seeds, (graph, cpu))
                other = await _walk(recall_pool, embedder, request, seeds, (reversed_graph, cpu))
                assert walk.strength == other.strength
                assert walk.paths == other.paths, (bank, query, budget)
    await cache.close()


async def _retain(api: httpx.AsyncClient, bank: str, items: list[dict[str, str]]) -> dict[str, str]:
    """Document id -> its fact's id, for the bank's facts after the retain."""
    response = await api.post(f"{BASE}/{bank}/memories", json={"items": items})
    assert response.status_code == 200, response.text
    listed = await api.get(f"{BASE}/{bank}/memories/list", params={"limit": "100"})
    return {i["document_id"]: i["id"] for i in listed.json()["items"]}


async def _stale(cache: GraphCache, bank: str) -> bool:
    """Whether the cache found the bank changed; it is read again if so."""
    stale = await cache.fresh(bank) is None
    if stale:
        assert await cache.read(bank) is not None
        assert await cache.fresh(bank) is not None
    return stale


def _reached(graph: BankGraph, request: RecallRequest, start: str) -> set[str]:
    config = RecallConfig()
    vector = graph.facts.embeddings[graph.facts.index[start]].astype(np.float32)
    work = graph_work(config, config.budget("mid"))
    return {s.unit_id for s in graph.hop(request, vector, {start: 1.0}, frozenset(), work)}


async def test_writes_empty_the_cache_and_reinforcement_does_not(
    api: httpx.AsyncClient, pool: Pool, cpu: ThreadPoolExecutor, bank_id: str
) -> None:
    cache = graph_cache_for(RecallConfig(), pool, cpu, 64 * 2**20)
    ids = await _retain(
        api,
        bank_id,
        [
            {"document_id": "a", "content": "Alice leads Project Atlas at Orbital."},
            {"document_id": "b", "content": "Alice moved Project Atlas to the new cluster."},
        ],
    )
    assert await cache.read(bank_id) is not None
    assert not await _stale(cache, bank_id)

    # Recall's reinforcement changes nothing the walk reads.
    access = AccessBuffer(pool)
    access.record(bank_id, list(ids.values()))
    assert await access.flush() == len(ids)
    assert not await _stale(cache, bank_id)

    # A retain (facts, links, entities, terms, statistics).
    ids = await _retain(
        api, bank_id, [{"document_id": "c", "content": "Alice found the Atlas cluster down."}]
    )
    assert await _stale(cache, bank_id)
    graph = await cache.fresh(bank_id)
    assert graph is not None and set(graph.facts.ids) == set(ids.values())
    assert ids["a"] in _reached(graph, RecallRequest(bank_id, "Atlas"), ids["c"])

    # A lifecycle change: the first fact superseded by the last.
    async with pool.acquire() as conn, conn.transaction():
        assert await supersede(conn, bank_id, Supersession(ids["a"], ids["c"], "test"))
    assert await _stale(cache, bank_id)
    graph = await cache.fresh(bank_id)
    assert graph is not None
    assert ids["a"] not in _reached(graph, RecallRequest(bank_id, "Atlas"), ids["c"])
    every = RecallRequest(bank_id, "Atlas", include_superseded=True)
    assert ids["a"] in _reached(graph, every, ids["c"])

    # Erasure: a fact deleted.
    deleted = await api.delete(f"{BASE}/{bank_id}/memories/{ids['b']}")
    assert deleted.status_code == 200, deleted.text
    assert await _stale(cache, bank_id)
    graph = await cache.fresh(bank_id)
    assert graph is not None and ids["b"] not in graph.facts.index
    await cache.close()  # the reads `fresh` started in the background


async def _changes(pool: Pool, bank: str) -> int:
    async with pool.acquire() as conn:
        count: int = await conn.fetchval(
            "SELECT count(*) FROM bank_changes WHERE bank_id = $1", bank
        )
    return count


async def test_a_graph_expires_and_the_changes_it_no_longer_needs_are_pruned(
    api: httpx.AsyncClient, pool: Pool, cpu: ThreadPoolExecutor, bank_id: str
) -> None:
    await _retain(api, bank_id, [{"document_id": "a", "content": "Alice leads Project Atlas."}])
    written = await _changes(pool, bank_id)
    assert written > 0
    cache = GraphCache(
        pool, cpu, 2**20, max_fanout=20, max_entity_mentions=5000, max_term_df=500, max_age=0.0
    )
    assert await cache.read(bank_id) is not None
    assert await cache.fresh(bank_id) is None  # expired
    await cache.close()
    pruner = ChangePruner(pool)
    await pruner.prune()  # the first call only takes a mark
    assert await _changes(pool, bank_id) == written
    await pruner.prune()
    assert await _changes(pool, bank_id) == 0  # ended before the mark: pruned


async def test_candidates_take_their_embeddings_from_the_held_bank(
    recall_pool: Pool, cpu: ThreadPoolExecutor, banks: Banks
) -> None:
    cache = graph_cache_for(RecallConfig(), recall_pool, cpu, 64 * 2**20)
    graph = await cache.read(banks.main)
    assert graph is not None
    ids = graph.facts.ids[::-1][:12]
    read = await fetch_rows(recall_pool, banks.main, ids, token_vectors=False, entities=True)
    # One candidate the bank in memory lacks (written after it was read): all are read.
    index = {i: n for i, n in graph.facts.index.items() if i != ids[0]}
    lacking = replace(graph, facts=replace(graph.facts, index=index))
    for held in (graph, lacking):
        rows = await fetch_rows(
            recall_pool, banks.main, ids, token_vectors=False, entities=True, held=held
        )
        assert [r.id for r in rows] == ids and len(rows) == len(read)
        for a, b in zip(rows, read, strict=True):
            assert np.array_equal(a.embedding, b.embedding) and a.embedding.dtype == np.float32
            assert replace(a, embedding=b.embedding) == b
    await cache.close()
