"""A Chinese name the bank already knows is recognised in later notes (issue 13): the local
extractor gets the bank's Han-script entity names, so jieba does not cut them apart."""

from __future__ import annotations

import httpx

BASE = "/v1/default/banks"


async def test_a_name_seen_once_is_an_entity_next_time(
    api: httpx.AsyncClient, bank_id: str
) -> None:
    first = {"content": "用户：我家的猫叫团子，很黏人。", "entities": ["团子"]}
    first["document_id"] = "cat"
    response = await api.post(f"{BASE}/{bank_id}/memories", json={"items": [first]})
    assert response.status_code == 200, response.text
    later = {"content": "团子今天来了。", "document_id": "visit"}
    response = await api.post(f"{BASE}/{bank_id}/memories", json={"items": [later]})
    assert response.status_code == 200, response.text
    listed = await api.get(f"{BASE}/{bank_id}/memories/list", params={"document_id": "visit"})
    facts = listed.json()["items"]
    assert facts and any("团子" in fact["entities"] for fact in facts), facts
