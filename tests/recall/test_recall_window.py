"""An explicit time window in the query is a constraint (engine/recall/window.py), through the
HTTP API over a bank retained by the real pipeline (tests/recall/conftest)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import httpx

from engine.db import Pool
from engine.embedding import Embedder
from engine.recall.query import embed_query
from engine.recall.temporal import temporal_arm
from engine.recall.types import RecallRequest, TimeWindow
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


async def test_a_bound_word_opens_the_window_on_one_side(
    client: httpx.AsyncClient, banks: Banks
) -> None:
    # "before October 2024": March and April, not October itself; "after April 2024":
    # October and December. Read as the month alone, both put October first.
    for query, inside in (
        ("What did Alice do before October 2024?", {"alice-march", "alice-april"}),
        ("What did Alice do after April 2024?", {"alice-october", "alice-december"}),
    ):
        body = await recall(client, banks.window, query)
        ranked = [r["id"] for r in body["results"]]
        expected = {banks.ids[name] for name in inside}
        assert set(ranked[:2]) == expected, (query, [r["text"] for r in body["results"]])
        placements = {p["id"]: p["placement"] for p in body["trace"]["window"]["results"]}
        assert {i for i, p in placements.items() if p == "inside"} == expected, query


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


async def test_the_exact_window_finds_facts_still_going_however_long_ago_they_began(
    recall_pool: Pool, embedder: Embedder, banks: Banks
) -> None:
    # A week's window, searched exactly by date (engine/recall/temporal.py): a fact begun six
    # months before it and one begun six days before it both still go on in it; one that
    # ended the day before does not. Dates set inside a transaction rolled back after.
    ranges = {
        "alice-march": ("2024-01-01", "2024-12-31"),  # begun > 744 hours before: migration 0025
        "alice-april": ("2024-06-25", "2024-07-02"),
        "alice-october": ("2024-07-03", "2024-07-03"),
        "alice-december": ("2024-05-01", "2024-06-30"),
    }
    window = TimeWindow(datetime(2024, 7, 1, tzinfo=UTC), datetime(2024, 7, 8, tzinfo=UTC))
    request = RecallRequest(banks.window, "What was Alice doing?")
    vector = embed_query(embedder, request.query).vector
    async with recall_pool.acquire() as conn:
        transaction = conn.transaction()
        await transaction.start()
        try:
            for document, (start, end) in ranges.items():
                await conn.execute(
                    "UPDATE memory_units SET occurred_start = $2, occurred_end = $3 WHERE id = $1",
                    banks.ids[document],
                    datetime.fromisoformat(start).replace(tzinfo=UTC),
                    datetime.fromisoformat(end).replace(tzinfo=UTC),
                )
            arm = await temporal_arm(
                conn,
                request,
                vector,
                window,
                limit=10,
                ef_search=40,
                spread_seeds=0,
                spread_decay=0.0,
                fanout=0,
            )
        finally:
            await transaction.rollback()
    expected = {banks.ids[d] for d in ("alice-march", "alice-april", "alice-october")}
    assert {h.unit_id for h in arm.hits} == expected
