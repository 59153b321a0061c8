"""Helpers of the consolidation tests: retain through the API, wait for the bank's
consolidation, read its observations."""

from __future__ import annotations

from typing import Any

import httpx
from support.operations import consolidated

BASE = "/v1/default/banks"


async def retain(api: httpx.AsyncClient, bank: str, items: list[dict[str, Any]]) -> list[str]:
    """Retain synchronously; returns the ids of the facts stored for these documents."""
    response = await api.post(f"{BASE}/{bank}/memories", json={"items": items})
    assert response.status_code == 200, response.text
    ids: list[str] = []
    for document_id in response.json()["document_ids"]:
        listed = await api.get(f"{BASE}/{bank}/memories/list", params={"document_id": document_id})
        ids += [item["id"] for item in listed.json()["items"]]
    return ids


async def status(api: httpx.AsyncClient, bank: str) -> dict[str, Any]:
    response = await api.get(f"{BASE}/{bank}/consolidation")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


# Until no fact waits and the latest consolidation has finished (and completed).
wait_consolidated = consolidated


async def observations(api: httpx.AsyncClient, bank: str) -> list[dict[str, Any]]:
    response = await api.get(
        f"{BASE}/{bank}/memories/list", params={"type": "observation", "limit": "1000"}
    )
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items


async def memory(api: httpx.AsyncClient, bank: str, memory_id: str) -> dict[str, Any]:
    response = await api.get(f"{BASE}/{bank}/memories/{memory_id}")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def configure(api: httpx.AsyncClient, bank: str, **config: Any) -> None:
    response = await api.put(f"{BASE}/{bank}", json=config)
    assert response.status_code == 200, response.text
