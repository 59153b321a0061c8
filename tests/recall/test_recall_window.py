"""An explicit time window in the query is a constraint (engine/recall/window.py), through the
HTTP API over a bank retained by the real pipeline (tests/recall/conftest)."""

from __future__ import annotations

from typing import Any

import httpx

from recall.recall_support import BASE, Banks

JANUARY_2025 = "2025-01-15T12:00:00+00:00"


async def recall(client: httpx.AsyncClient, bank: str, query: str) -> dict[str, Any]:
    response = await client.post(
        f"{BASE}/{bank}/memories/recall",
        json={"query": query, "query_timestamp": JANUARY_2025, "trace": True},
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def test_facts_inside_the_named_window_rank_first(
    client: httpx.AsyncClient, banks: Banks
) -> None:
    spring = {banks.ids["alice-march"], banks.ids["alice-april"]}
    for query in ("What did Alice do last spring?", "爱丽丝去年春天做了什么？"):
        body = await recall(client, banks.window, query)
        ranked = [r["id"] for r in body["results"]]
        assert set(ranked[:2]) == spring, (query, [r["text"] for r in body["results"]])
        window = body["trace"]["window"]
        assert window["start"].startswith("2024-03-01"), window
        assert window["end"].startswith("2024-06-01"), window
        placements = {p["id"]: p["placement"] for p in window["results"]}
        assert {i for i, p in placements.items() if p == "inside"} == spring
        assert placements[banks.ids["alice-december"]] == "outside"


async def test_the_reranker_alone_would_have_put_december_first(
    client: httpx.AsyncClient, banks: Banks
) -> None:
    # The same question with its time given as no window at all: what the constraint undoes.
    response = await client.post(
        f"{BASE}/{banks.window}/memories/recall",
        json={"query": "What did Alice do?", "query_timestamp": JANUARY_2025, "trace": True},
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["trace"]["window"] is None  # no time expression, no window
    assert body["results"][0]["id"] == banks.ids["alice-december"]
