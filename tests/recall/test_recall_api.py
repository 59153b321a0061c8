"""Recall through the HTTP API over banks retained by the real pipeline (tests/recall/conftest)."""

from __future__ import annotations

from typing import Any

import httpx
from pgvector import Vector

from engine.db import Pool
from engine.embedding import Embedder
from recall.recall_support import BASE, NOW, OBSERVED_ITEMS, Banks


async def recall(
    client: httpx.AsyncClient, bank: str, query: str, **options: Any
) -> dict[str, Any]:
    response = await client.post(
        f"{BASE}/{bank}/memories/recall",
        json={"query": query, "query_timestamp": NOW, **options},
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def ids(body: dict[str, Any]) -> list[str]:
    return [r["id"] for r in body["results"]]


def arm_ids(body: dict[str, Any], arm: str) -> list[str]:
    return [h["id"] for h in body["trace"]["arms"][arm]["hits"]]


async def test_keyword_arm_finds_an_exact_code(client: httpx.AsyncClient, banks: Banks) -> None:
    body = await recall(client, banks.main, "ZX-4471", trace=True)
    target = banks.ids["code"]
    assert ids(body)[0] == target
    assert arm_ids(body, "keyword") == [target]  # only that fact has the terms
    assert body["results"][0]["scores"]["keyword"] > 0


async def test_semantic_arm_finds_a_paraphrase(client: httpx.AsyncClient, banks: Banks) -> None:
    body = await recall(client, banks.main, "Who got a new cat?", trace=True)
    target = banks.ids["dana"]
    assert target not in arm_ids(body, "keyword")  # no shared index term
    assert arm_ids(body, "semantic")[0] == target
    assert ids(body)[0] == target


async def test_graph_arm_finds_the_second_hop(client: httpx.AsyncClient, banks: Banks) -> None:
    # "Zelda's brother is named Ivo." + "Ivo works as a lighthouse keeper in Porto.": the
    # second fact shares no term with the question and 40 other brothers' jobs are closer
    # to it, so only the shared entity Ivo reaches it.
    body = await recall(
        client, banks.main, "What does Zelda's brother do for a living?", budget="low", trace=True
    )
    hop, answer = banks.ids["zelda"], banks.ids["ivo"]
    assert arm_ids(body, "keyword")[0] == hop
    assert answer not in arm_ids(body, "keyword")
    assert answer not in arm_ids(body, "semantic")
    assert answer in arm_ids(body, "graph")
    assert answer in ids(body)


async def test_temporal_arm_resolves_last_week(client: httpx.AsyncClient, banks: Banks) -> None:
    body = await recall(client, banks.main, "Where did Priya go last week?", trace=True)
    target = banks.ids["priya-june"]
    window = body["trace"]["window"]
    assert window["start"].startswith("2024-06-08") and window["end"].startswith("2024-06-15")
    assert arm_ids(body, "temporal")[0] == target
    assert ids(body)[0] == target
    other = await recall(client, banks.main, "Where did Priya go in March 2024?")
    assert ids(other)[0] == banks.ids["priya-march"]


async def test_no_time_expression_means_no_temporal_arm(
    client: httpx.AsyncClient, banks: Banks
) -> None:
    body = await recall(client, banks.main, "Where did Priya go?", trace=True)
    assert body["trace"]["window"] is None
    assert body["trace"]["arms"]["temporal"]["candidates"] == 0


async def test_chinese_query_finds_chinese_fact(client: httpx.AsyncClient, banks: Banks) -> None:
    body = await recall(client, banks.cjk, "王芳的咖啡店在哪里？", trace=True)
    top = body["results"][0]
    assert top["text"] == "王芳在上海开了一家咖啡店。"
    assert arm_ids(body, "keyword")[0] == top["id"]


async def test_token_budget_fills_in_rank_order_without_cutting(
    client: httpx.AsyncClient, banks: Banks
) -> None:
    everything = await recall(client, banks.main, "orchid greenhouse", max_tokens=100_000)
    texts = [r["text"] for r in everything["results"]]
    assert len(texts) > 3
    budget = sum((len(t) + 3) // 4 for t in texts[:3])
    limited = await recall(client, banks.main, "orchid greenhouse", max_tokens=budget)
    kept = [r["text"] for r in limited["results"]]
    assert kept[:3] == texts[:3]  # whole facts, in rank order
    assert sum((len(t) + 3) // 4 for t in kept) <= budget
    assert all(t in texts for t in kept)
    one = await recall(client, banks.main, "orchid greenhouse", max_tokens=1)
    assert [r["text"] for r in one["results"]] == texts[:1]  # too big alone: returned alone


async def test_tag_modes(client: httpx.AsyncClient, banks: Banks) -> None:
    names = {v: k for k, v in banks.ids.items()}

    async def tagged(mode: str, tags: list[str]) -> set[str]:
        body = await recall(client, banks.main, "orchid greenhouse", tags=tags, tags_match=mode)
        return {names[i] for i in ids(body) if names[i].startswith("tag-")}

    assert await tagged("any", ["alpha"]) == {"tag-alpha", "tag-both", "tag-none"}
    assert await tagged("any_strict", ["alpha"]) == {"tag-alpha", "tag-both"}
    assert await tagged("all_strict", ["alpha", "beta"]) == {"tag-both"}
    assert await tagged("all", ["alpha", "beta"]) == {"tag-both", "tag-none"}
    assert await tagged("exact", ["alpha"]) == {"tag-alpha"}
    body = await recall(client, banks.main, "orchid", tags=["alpha"], tags_match="any_strict")
    assert all("alpha" in r["tags"] for r in body["results"])


async def test_results_follow_the_wire_format(
    client: httpx.AsyncClient, banks: Banks, recall_pool: Pool
) -> None:
    body = await recall(client, banks.main, "When does the orchid greenhouse open?")
    top = next(r for r in body["results"] if r["id"] == banks.ids["tag-alpha"])
    assert top["metadata"] == {"source": "notes", "page": "12"}
    assert top["type"] in ("world", "experience", "observation")
    assert isinstance(top["entities"], list)
    assert top["mentioned_at"] == "2024-01-05T09:00:00+00:00"
    assert top["document_id"] == "tag-alpha" and top["chunk_id"]
    assert top["tags"] == ["alpha"]
    assert set(top["scores"]) >= {"final", "semantic", "keyword", "reranker"}
    assert all(isinstance(r["scores"]["final"], float) for r in body["results"])
    assert "entities" in body and "chunks" not in body and "trace" not in body
    # The entities map names every result's entities, with the ids stored for them.
    mentioned = {name for r in body["results"] for name in r["entities"]}
    assert mentioned and set(body["entities"]) == mentioned
    async with recall_pool.acquire() as conn:
        stored = {
            r["canonical_name"]: r["id"]
            for r in await conn.fetch(
                "SELECT id::text, canonical_name FROM entities WHERE bank_id = $1", banks.main
            )
        }
    for name, state in body["entities"].items():
        assert state["canonical_name"] == name and state["entity_id"] == stored[name]


async def test_include_null_turns_entities_off_and_chunks_on(
    client: httpx.AsyncClient, banks: Banks
) -> None:
    body = await recall(
        client,
        banks.main,
        "Where does Ivo work?",
        include={"entities": None, "chunks": {"max_tokens": 500}, "source_facts": None},
    )
    assert "entities" not in body
    assert all("entities" not in r for r in body["results"])
    chunk_id = next(r["chunk_id"] for r in body["results"] if r["id"] == banks.ids["ivo"])
    assert body["chunks"][chunk_id]["text"] == "Ivo works as a lighthouse keeper in Porto."
    named = await recall(client, banks.main, "Where does Ivo work?")
    ivo = next(r for r in named["results"] if r["id"] == banks.ids["ivo"])
    assert "Ivo" in ivo["entities"]
    assert named["entities"]["Ivo"]["canonical_name"] == "Ivo"


async def test_types_filter(client: httpx.AsyncClient, banks: Banks) -> None:
    body = await recall(client, banks.main, "orchid", types=["experience"])
    assert body["results"] == []  # the corpus has world facts only
    body = await recall(client, banks.main, "orchid", types=["world"])
    assert body["results"]


async def test_trace_reports_arms_fusion_rerank_and_timings(
    client: httpx.AsyncClient, banks: Banks
) -> None:
    body = await recall(client, banks.main, "Who adopted a kitten last week?", trace=True)
    trace = body["trace"]
    assert set(trace["arms"]) == {"semantic", "keyword", "graph", "temporal"}
    for arm in trace["arms"].values():
        assert {"candidates", "elapsed_ms", "weight", "hits", "note"} <= set(arm)
        ranks = [h["rank"] for h in arm["hits"]]
        assert ranks == list(range(1, len(ranks) + 1))
    assert trace["fusion"]["method"] == "weighted_rrf" and trace["fusion"]["top"]
    assert trace["rerank"]["reranker"] == "maxsim"
    assert {"embed", "retrieve", "fetch", "rerank", "total"} <= set(trace["timings_ms"])
    assert trace["token_budget"]["results"] == len(body["results"])


async def test_invalid_requests_name_the_field(client: httpx.AsyncClient, banks: Banks) -> None:
    url = f"{BASE}/{banks.main}/memories/recall"
    cases: list[tuple[dict[str, Any], int, str]] = [
        ({"query": "x" * 2001}, 400, "query"),
        ({"query": "   "}, 400, "query"),
        ({"query": "q", "budget": "huge"}, 422, "budget"),
        ({"query": "q", "max_tokens": 0}, 422, "max_tokens"),
        ({"query": "q", "tags_match": "some"}, 422, "tags_match"),
        ({"query": "q", "types": ["dream"]}, 422, "types.0"),
        ({"query": "q", "query_timestamp": "yesterday"}, 400, "query_timestamp"),
        (
            {"query": "q", "temporal_window": {"start": "x", "end": NOW}},
            400,
            "temporal_window.start",
        ),
        ({"query": "q", "tag_groups": [{"tags": ["a"]}]}, 400, "tag_groups"),
        ({}, 422, "query"),
    ]
    for payload, status, field in cases:
        response = await client.post(url, json=payload)
        assert response.status_code == status, (payload, response.text)
        assert response.json()["field"] == field, (payload, response.text)
    missing = await client.post(f"{BASE}/no-such-bank/memories/recall", json={"query": "q"})
    assert missing.status_code == 404


async def test_recall_metrics_are_exported(client: httpx.AsyncClient, banks: Banks) -> None:
    await recall(client, banks.main, "orchid")
    text = (await client.get("/metrics")).text
    assert 'engram_recall_arm_duration_seconds_count{arm="semantic"}' in text
    assert "engram_recall_results_count 1.0" in text


def _series(text: str, name: str) -> float:
    lines = [line for line in text.splitlines() if line.startswith(name + " ")]
    return float(lines[0].split()[-1]) if lines else 0.0


async def test_a_repeated_recall_takes_its_token_vectors_from_memory(
    client: httpx.AsyncClient, banks: Banks
) -> None:
    query = "What does Zelda's brother do for a living?"
    first = (await recall(client, banks.main, query, trace=True))["trace"]["rerank"]
    second = (await recall(client, banks.main, query, trace=True))["trace"]["rerank"]
    assert first["token_vectors"]["read"] > 0
    assert second["token_vectors"] == {"cached": first["token_vectors"]["read"], "read": 0}
    text = (await client.get("/metrics")).text
    cached = _series(text, 'engram_recall_token_vectors_total{source="cache"}')
    read = _series(text, 'engram_recall_token_vectors_total{source="database"}')
    assert (cached, read) == (second["token_vectors"]["cached"], first["token_vectors"]["read"])


async def test_observations_bring_their_source_facts(
    client: httpx.AsyncClient, banks: Banks, recall_pool: Pool, embedder: Embedder
) -> None:
    # An observation as consolidation stores it: a memory unit plus its supporting evidence.
    text = "Noor is an endurance athlete who trains outdoors."
    vector = embedder.embed([text])[0]
    async with recall_pool.acquire() as conn:
        observation = await conn.fetchval(
            "INSERT INTO memory_units (id, bank_id, fact_type, text, embedding, proof_count)"
            " VALUES (gen_random_uuid(), $1, 'observation', $2, $3, 2) RETURNING id::text",
            banks.observed,
            text,
            Vector(vector),
        )
        await conn.execute(
            "INSERT INTO observation_evidence (observation_id, fact_id, bank_id, quote, stance)"
            " SELECT $1::uuid, f::uuid, $2, 'q', 'supports' FROM unnest($3::text[]) AS f",
            observation,
            banks.observed,
            [banks.ids["swim"], banks.ids["run"]],
        )
    body = await recall(
        client,
        banks.observed,
        "What kind of athlete is Noor?",
        types=["observation"],
        include={"entities": None, "chunks": None, "source_facts": {"max_tokens": 4096}},
    )
    (result,) = body["results"]
    assert result["id"] == observation and result["type"] == "observation"
    assert set(result["source_fact_ids"]) == {banks.ids["swim"], banks.ids["run"]}
    assert set(body["source_facts"]) == {banks.ids["swim"], banks.ids["run"]}
    assert body["source_facts"][banks.ids["swim"]]["text"] == OBSERVED_ITEMS[0]["content"]
    assert body["source_facts_truncated"] is False
    tight = await recall(
        client,
        banks.observed,
        "What kind of athlete is Noor?",
        types=["observation"],
        include={"source_facts": {"max_tokens": 10}},
    )
    assert len(tight["source_facts"]) == 1 and tight["source_facts_truncated"] is True
