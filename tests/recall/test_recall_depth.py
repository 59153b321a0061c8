"""Multi-hop recall: the graph arm walks from the entities a query names (engine/recall/graph.py)
over the depth bank of tests/recall/recall_support.py, retained through the real pipeline."""

from __future__ import annotations

import httpx

from engine.db import Pool
from engine.embedding import Embedder
from engine.entities import normalize_name
from engine.recall.config import RecallConfig
from engine.recall.graph import GraphWalk, graph_work
from engine.recall.names import name_keys
from engine.recall.query import embed_query
from engine.recall.types import ArmResult, Budget, RecallRequest
from recall.recall_support import SAM_THINGS, Banks
from recall.test_recall_api import ids, recall

ALICE = "Was Alice affected by recent issues?"


async def walk(pool: Pool, embedder: Embedder, bank: str, query: str, budget: Budget) -> ArmResult:
    """The graph arm alone, from the query's entities only, nothing left out."""
    config = RecallConfig()
    request = RecallRequest(bank, query, budget=budget)
    vector = embed_query(embedder, query).vector
    graph = GraphWalk(pool, request, vector, graph_work(config, config.budget(budget)))
    await graph.from_names(name_keys(query))
    return graph.result([], frozenset(), 100)


async def test_recall_reaches_the_outage_through_alice(
    client: httpx.AsyncClient, banks: Banks
) -> None:
    body = await recall(client, banks.depth, ALICE, budget="mid", trace=True)
    lead, runs, outage = (banks.ids[d] for d in ("depth-lead", "depth-runs", "depth-outage"))
    assert outage in ids(body)[:10]
    assert body["trace"]["arms"]["graph"]["result_paths"][outage] == [
        "entity:Alice",
        lead,
        "term:atlas",
        runs,
        "term:cluster",
        outage,
    ]


async def test_the_budget_sets_how_many_hops_the_walk_takes(
    recall_pool: Pool, embedder: Embedder, banks: Banks
) -> None:
    runs, outage = banks.ids["depth-runs"], banks.ids["depth-outage"]
    low = await walk(recall_pool, embedder, banks.depth, ALICE, "low")
    mid = await walk(recall_pool, embedder, banks.depth, ALICE, "mid")
    assert runs in low.paths and outage not in low.paths  # one hop past Alice's fact
    assert outage in [h.unit_id for h in mid.hits]


async def test_the_seeds_walk_takes_one_hop_at_mid(
    recall_pool: Pool, embedder: Embedder, banks: Banks
) -> None:
    # From the other arms' seeds the walk goes one hop at mid (a chain through a named
    # entity keeps two, above): Atlas's cluster fact is one step from the lead fact, the
    # outage two.
    lead, runs, outage = (banks.ids[d] for d in ("depth-lead", "depth-runs", "depth-outage"))
    config = RecallConfig()
    vector = embed_query(embedder, ALICE).vector
    reached: dict[Budget, set[str]] = {}
    for budget in ("mid", "high"):
        request = RecallRequest(banks.depth, ALICE, budget=budget)
        graph = GraphWalk(recall_pool, request, vector, graph_work(config, config.budget(budget)))
        await graph.from_seeds([(lead, 0.5)])
        reached[budget] = set(graph.paths)
    assert runs in reached["mid"] and outage not in reached["mid"]
    assert outage in reached["high"]


async def test_a_popular_entity_does_not_flood_the_walk(
    recall_pool: Pool, embedder: Embedder, banks: Banks
) -> None:
    # Sam is on 30 of the bank's 45 facts, Wren on 2: through the name, a Sam fact carries a
    # seventh of a Wren fact's strength (specificity 0.11 against 0.76), however many paths
    # lead to it (summed paths made the Sam clique the strongest); the best Sam fact is the
    # one a few days from the concert, by a temporal link.
    query = "Did Sam buy anything for Wren's concert?"
    arm = await walk(recall_pool, embedder, banks.depth, query, "mid")
    scores = {h.unit_id: h.score for h in arm.hits}
    wren = {banks.ids["depth-sister"], banks.ids["depth-concert"]}
    sam = [banks.ids[f"depth-sam{n}"] for n in range(len(SAM_THINGS))]
    assert {h.unit_id for h in arm.hits[:2]} == wren
    assert max(scores.get(s, 0.0) for s in sam) < min(scores[w] for w in wren) / 2


def test_name_keys_are_the_keys_entity_resolution_stores() -> None:
    english = name_keys("Was Alice's team on Project Atlas hit by the U.S. outage?")
    assert {"alice", "project atlas", "us", "atlas"} <= set(english)
    assert normalize_name("Project Atlas") in english
    # A Traditional-script name jieba would split is found whole, folded as retain folds it.
    chinese = name_keys("林曉雯在臺北做什麼?")
    assert normalize_name("林曉雯") == "林晓雯" and "林晓雯" in chinese
    assert normalize_name("台北") in chinese
