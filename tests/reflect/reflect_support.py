"""Helpers of the reflect tests: build a bank through the API, call reflect, read what the
scripted model was sent."""

from __future__ import annotations

from typing import Any

import httpx

BASE = "/v1/default/banks"


def said(speaker: str, text: str, day: str, document_id: str) -> dict[str, str]:
    return {
        "content": f"{speaker}: {text}",
        "timestamp": f"{day}T10:00:00Z",
        "document_id": document_id,
    }


async def configure(api: httpx.AsyncClient, bank: str, **config: Any) -> None:
    response = await api.put(f"{BASE}/{bank}", json=config)
    assert response.status_code == 200, response.text


async def retain(api: httpx.AsyncClient, bank: str, items: list[dict[str, Any]]) -> list[str]:
    """Retain synchronously; returns the ids of the facts stored for these documents."""
    response = await api.post(f"{BASE}/{bank}/memories", json={"items": items})
    assert response.status_code == 200, response.text
    ids: list[str] = []
    for document_id in response.json()["document_ids"]:
        listed = await api.get(f"{BASE}/{bank}/memories/list", params={"document_id": document_id})
        ids += [item["id"] for item in listed.json()["items"]]
    return ids


async def reflect(api: httpx.AsyncClient, bank: str, **body: Any) -> dict[str, Any]:
    response = await api.post(f"{BASE}/{bank}/reflect", json=body)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def system_prompt_of(request: dict[str, Any]) -> str:
    [system] = [m["content"] for m in request["messages"] if m["role"] == "system"]
    assert isinstance(system, str)
    return system


def tool_results(request: dict[str, Any]) -> list[str]:
    return [str(m["content"]) for m in request["messages"] if m["role"] == "tool"]
