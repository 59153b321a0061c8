"""Bad input gets a 4xx naming the field, never a 500 or a traceback."""

from __future__ import annotations

import httpx
import pytest

BASE = "/v1/default/banks"


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        ({}, 422, "items"),
        ({"items": []}, 422, "items"),
        ({"items": [{"content": ""}]}, 422, "items.0.content"),
        ({"items": [{"text": "no content key"}]}, 422, "items.0.content"),
        ({"items": [{"content": "x", "timestamp": "last tuesday"}]}, 400, "items.0.timestamp"),
        ({"items": [{"content": "x", "metadata": {"n": 1}}]}, 422, "items.0.metadata.n"),
        ({"items": [{"content": "x", "update_mode": "merge"}]}, 422, "items.0.update_mode"),
        ({"items": "not a list"}, 422, "items"),
    ],
)
async def test_bad_retain_bodies_name_the_field(
    api: httpx.AsyncClient, bank_id: str, body: dict[str, object], status: int, field: str
) -> None:
    response = await api.post(f"{BASE}/{bank_id}/memories", json=body)
    assert response.status_code == status, response.text
    assert response.json()["field"] == field
    assert "Traceback" not in response.text


async def test_malformed_json_is_a_400(api: httpx.AsyncClient, bank_id: str) -> None:
    response = await api.post(
        f"{BASE}/{bank_id}/memories",
        content=b'{"items": [',
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 400
    assert response.json()["field"] == "body"


async def test_out_of_range_disposition_is_rejected(api: httpx.AsyncClient, bank_id: str) -> None:
    response = await api.put(f"{BASE}/{bank_id}", json={"disposition_skepticism": 9})
    assert response.status_code == 422
    assert response.json()["field"] == "disposition_skepticism"


async def test_unknown_bank_reads_are_404(api: httpx.AsyncClient) -> None:
    for path in ("/profile", "/memories/list", "/documents", "/entities", "/operations"):
        response = await api.get(f"{BASE}/no-such-bank{path}")
        assert response.status_code == 404, (path, response.text)


async def test_unknown_ids_are_404(api: httpx.AsyncClient, bank_id: str) -> None:
    await api.put(f"{BASE}/{bank_id}", json={})
    for path in (
        "/memories/not-a-uuid",
        "/entities/not-a-uuid",
        "/documents/nope",
        "/operations/nope",
    ):
        response = await api.get(f"{BASE}/{bank_id}{path}")
        assert response.status_code == 404, (path, response.text)


async def test_llm_mode_without_a_key_is_refused(api: httpx.AsyncClient, bank_id: str) -> None:
    await api.put(f"{BASE}/{bank_id}", json={"extraction_mode": "llm"})
    response = await api.post(f"{BASE}/{bank_id}/memories", json={"items": [{"content": "x"}]})
    assert response.status_code == 400
    assert response.json()["field"] == "extraction_mode"
