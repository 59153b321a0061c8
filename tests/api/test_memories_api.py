"""Reading what retain stored: filters, paging, entities resolved without false merges."""

from __future__ import annotations

from typing import Any

import httpx

BASE = "/v1/default/banks"


async def retain(api: httpx.AsyncClient, bank: str, items: list[dict[str, Any]]) -> None:
    response = await api.post(f"{BASE}/{bank}/memories", json={"items": items})
    assert response.status_code == 200, response.text


async def listed(api: httpx.AsyncClient, bank: str, **params: str) -> dict[str, Any]:
    response = await api.get(f"{BASE}/{bank}/memories/list", params=params)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def test_filters_by_tag_type_document_and_pages(api: httpx.AsyncClient, bank_id: str) -> None:
    await retain(
        api,
        bank_id,
        [
            {"content": "Kai: I learned to surf in Bali.", "document_id": "a", "tags": ["travel"]},
            {"content": "The Eiffel Tower is in Paris.", "document_id": "b", "tags": ["facts"]},
            {"content": "Kai: I started a pottery class.", "document_id": "c"},
        ],
    )
    everything = await listed(api, bank_id)
    assert everything["total"] == 3
    travel = await listed(api, bank_id, tags="travel", tags_match="any_strict")
    assert [i["document_id"] for i in travel["items"]] == ["a"]
    with_untagged = await listed(api, bank_id, tags="travel")  # "any" keeps untagged ones
    assert sorted(i["document_id"] for i in with_untagged["items"]) == ["a", "c"]
    experience = await listed(api, bank_id, type="experience")
    assert sorted(i["document_id"] for i in experience["items"]) == ["a", "c"]
    world = await listed(api, bank_id, type="world")
    assert [i["document_id"] for i in world["items"]] == ["b"]
    assert [i["document_id"] for i in (await listed(api, bank_id, document_id="c"))["items"]] == [
        "c"
    ]
    page = await listed(api, bank_id, limit="2", offset="2")
    assert page["total"] == 3 and len(page["items"]) == 1 and page["offset"] == 2
    bad = await api.get(f"{BASE}/{bank_id}/memories/list", params={"type": "dream"})
    assert bad.status_code == 400 and bad.json()["field"] == "type"


async def test_similar_names_stay_distinct_entities(api: httpx.AsyncClient, bank_id: str) -> None:
    await retain(
        api,
        bank_id,
        [
            {"content": "Tigran moved to Yerevan last year.", "document_id": "t1"},
            {"content": "Iran signed a trade deal with Armenia.", "document_id": "t2"},
            {"content": "The meeting is in Room 101 on Monday.", "document_id": "r1"},
            {"content": "The workshop is in Room 102 on Tuesday.", "document_id": "r2"},
            {"content": "Later Tigran met Ana in Yerevan.", "document_id": "t3"},
        ],
    )
    entities = (await api.get(f"{BASE}/{bank_id}/entities")).json()["items"]
    names = {e["canonical_name"]: e for e in entities}
    assert "Tigran" in names and "Iran" in names
    assert "Room 101" in names and "Room 102" in names
    assert names["Tigran"]["mention_count"] == 2  # the second mention resolved, not duplicated
    detail = (await api.get(f"{BASE}/{bank_id}/entities/{names['Tigran']['id']}")).json()
    assert all("Tigran" in fact["text"] for fact in detail["facts"])


async def test_facts_are_linked(api: httpx.AsyncClient, bank_id: str) -> None:
    await retain(
        api,
        bank_id,
        [
            {
                "content": "Mira adopted a greyhound named Comet.",
                "document_id": "m1",
                "timestamp": "2024-04-01T10:00:00Z",
            },
            {
                "content": "Mira takes Comet to the beach every Sunday.",
                "document_id": "m2",
                "timestamp": "2024-04-02T10:00:00Z",
            },
        ],
    )
    facts = (await listed(api, bank_id))["items"]
    detail = (await api.get(f"{BASE}/{bank_id}/memories/{facts[0]['id']}")).json()
    kinds = {link["type"] for link in detail["links"]}
    assert {"entity", "temporal"} <= kinds
