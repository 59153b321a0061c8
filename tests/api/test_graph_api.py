"""The graphs the console draws: entities joined by shared facts, memories by their links."""

from __future__ import annotations

from typing import Any

import httpx

BASE = "/v1/default/banks"


async def retain(api: httpx.AsyncClient, bank: str, items: list[dict[str, Any]]) -> None:
    response = await api.post(f"{BASE}/{bank}/memories", json={"items": items})
    assert response.status_code == 200, response.text


async def get(api: httpx.AsyncClient, path: str, **params: str) -> dict[str, Any]:
    response = await api.get(path, params=params)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def test_entity_graph_counts_facts_naming_both(api: httpx.AsyncClient, bank_id: str) -> None:
    await retain(
        api,
        bank_id,
        [
            {"content": "Kai met Lena in Lisbon on Monday.", "document_id": "a"},
            {"content": "Kai and Lena went surfing in Lisbon.", "document_id": "b"},
            {"content": "Marco lives in Rome.", "document_id": "c"},
        ],
    )
    graph = await get(api, f"{BASE}/{bank_id}/entities/graph")
    names = {n["id"]: n["label"] for n in graph["nodes"]}
    pairs = {
        tuple(sorted((names[e["source"]], names[e["target"]]))): e["cooccurrence_count"]
        for e in graph["edges"]
    }
    assert pairs[("Kai", "Lena")] == 2
    assert ("Marco", "Rome") in pairs and pairs[("Marco", "Rome")] == 1
    assert not any("Marco" in pair and "Kai" in pair for pair in pairs)
    assert graph["total_entities"] == len(names) and graph["total_edges"] == len(pairs)
    strong = await get(api, f"{BASE}/{bank_id}/entities/graph", min_count="2")
    assert {e["cooccurrence_count"] for e in strong["edges"]} == {2}
    assert strong["total_edges"] < graph["total_edges"]
    one = await get(api, f"{BASE}/{bank_id}/entities/graph", min_count="2", limit="1")
    assert len(one["edges"]) == 1 and one["total_edges"] == strong["total_edges"]
    endpoints = {one["edges"][0]["source"], one["edges"][0]["target"]}
    assert endpoints <= {n["id"] for n in one["nodes"]}


async def test_memory_graph_has_links_among_its_nodes(api: httpx.AsyncClient, bank_id: str) -> None:
    await retain(
        api,
        bank_id,
        [
            {"content": "Kai adopted a dog named Biscuit.", "document_id": "a", "tags": ["pets"]},
            {"content": "Kai walks Biscuit every morning.", "document_id": "b", "tags": ["pets"]},
            {"content": "The Eiffel Tower is in Paris.", "document_id": "c"},
        ],
    )
    graph = await get(api, f"{BASE}/{bank_id}/graph")
    ids = {n["id"] for n in graph["nodes"]}
    assert graph["total_units"] == len(ids) == len(graph["table_rows"])
    assert graph["edges"], "facts about Kai and Biscuit are linked"
    assert all(e["source"] in ids and e["target"] in ids for e in graph["edges"])
    pets = await get(api, f"{BASE}/{bank_id}/graph", tags="pets")
    assert {n["document_id"] for n in pets["nodes"]} == {"a", "b"}
    limited = await get(api, f"{BASE}/{bank_id}/graph", limit="1")
    assert len(limited["nodes"]) == 1 and limited["total_units"] == graph["total_units"]
    assert limited["edges"] == []


async def test_graph_rejects_bad_parameters_and_unknown_banks(
    api: httpx.AsyncClient, bank_id: str
) -> None:
    await retain(api, bank_id, [{"content": "Kai met Lena."}])
    for path, params, field in [
        ("entities/graph", {"min_count": "0"}, "min_count"),
        ("entities/graph", {"limit": "lots"}, "limit"),
        ("graph", {"type": "dream"}, "type"),
        ("graph", {"chunk_id": "x"}, "chunk_id"),
    ]:
        response = await api.get(f"{BASE}/{bank_id}/{path}", params=params)
        assert response.status_code == 400 and response.json()["field"] == field, response.text
    for path in ("graph", "entities/graph"):
        assert (await api.get(f"{BASE}/no-such-bank/{path}")).status_code == 404
