"""Helpers of the consolidation tests: retain through the API, wait for the bank's
consolidation, read its observations, write one by hand."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import httpx
from support.operations import consolidated

from engine.consolidation.claims import parse_claim
from engine.consolidation.encode import text_encoder
from engine.consolidation.merge import Current
from engine.consolidation.store import Evidence, insert_observation
from engine.db import Pool
from engine.embedding import Embedder

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


NOW = datetime(2024, 6, 1, tzinfo=UTC)


async def facts_of(api: httpx.AsyncClient, bank: str, texts: list[str]) -> list[str]:
    await configure(api, bank, enable_observations=False)  # these tests write by hand
    items = [
        {"content": text, "timestamp": f"2024-05-{i + 1:02d}T09:00:00Z", "document_id": f"d{i}"}
        for i, text in enumerate(texts)
    ]
    ids: list[str] = []
    for item in items:
        ids += await retain(api, bank, [item])
    assert len(ids) == len(texts)
    return ids


async def observe(
    pool: Pool, embedder: Embedder, cpu: ThreadPoolExecutor, bank: str, fact_id: str, text: str
) -> Current:
    encoded = (await text_encoder(embedder, cpu)([text]))[0]
    async with pool.acquire() as conn, conn.transaction():
        observation_id = await insert_observation(
            conn,
            bank,
            text=text,
            scope=[],
            encoded=encoded,
            claim=parse_claim(text),
            origin="local",
            evidence=[Evidence(fact_id, text)],
            as_of=NOW,
        )
        created = await conn.fetchval(
            "SELECT created_at FROM memory_units WHERE id = $1", observation_id
        )
    return Current(observation_id, text, [], encoded.embedding, parse_claim(text), NOW, created)
