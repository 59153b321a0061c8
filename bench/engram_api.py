"""The slice of Engram's public HTTP API (Hindsight v1 wire format) the benchmarks use."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

import httpx

API: Final = "/v1/default/banks"
TERMINAL: Final = frozenset({"completed", "failed", "cancelled"})
POLL_INTERVAL_S: Final = 0.2
LIST_PAGE: Final = 1000  # the server's largest page


class BenchError(Exception):
    """Engram answered something the benchmark cannot go on with."""


@dataclass(frozen=True)
class RetainItem:
    content: str
    timestamp: datetime
    metadata: dict[str, str]
    document_id: str | None = None  # its own document; None: the request's


@dataclass(frozen=True)
class Recalled:
    """One recall: its results as returned, and the client-side wall time."""

    results: list[dict[str, Any]]
    seconds: float


def _check(response: httpx.Response, what: str) -> dict[str, Any]:
    if response.is_success:
        body = response.json()
        if not isinstance(body, dict):
            raise BenchError(f"{what}: expected a JSON object, got {body!r:.200}")
        return body
    raise BenchError(f"{what}: HTTP {response.status_code} {response.text[:500]}")


class EngramAPI:
    def __init__(self, client: httpx.AsyncClient) -> None:
        self._client = client

    async def ready(self) -> None:
        try:
            response = await self._client.get("/ready")
        except httpx.TransportError as exc:
            raise BenchError(f"Engram is not reachable at {self._client.base_url}: {exc}") from exc
        _check(response, "GET /ready")

    async def reset_bank(self, bank_id: str) -> None:
        """Delete the bank if it exists, then create it empty."""
        response = await self._client.delete(f"{API}/{bank_id}")
        if response.status_code != 404:
            _check(response, f"DELETE bank {bank_id}")
        _check(await self._client.put(f"{API}/{bank_id}", json={}), f"PUT bank {bank_id}")

    async def bank_exists(self, bank_id: str) -> bool:
        response = await self._client.get(f"{API}/{bank_id}/profile")
        if response.status_code == 404:
            return False
        _check(response, f"GET bank {bank_id}")
        return True

    async def retain(
        self, bank_id: str, document_id: str, items: list[RetainItem], *, wait: bool
    ) -> dict[str, Any]:
        """One request; items go to `document_id` unless they name their own. `wait=False`
        returns as soon as the operation is queued."""
        body = {
            "async": not wait,
            "items": [
                {
                    "content": item.content,
                    "timestamp": item.timestamp.isoformat(),
                    "metadata": item.metadata,
                    "document_id": item.document_id or document_id,
                }
                for item in items
            ],
        }
        response = await self._client.post(f"{API}/{bank_id}/memories", json=body)
        result = _check(response, f"retain {bank_id}/{document_id}")
        if wait and not result.get("success", False):
            raise BenchError(f"retain {bank_id}/{document_id} failed: {result}")
        return result

    async def operation_status(self, bank_id: str, operation_id: str) -> dict[str, Any]:
        response = await self._client.get(f"{API}/{bank_id}/operations/{operation_id}")
        return _check(response, f"operation {operation_id}")

    async def wait_operations(self, pending: list[tuple[str, str]]) -> None:
        """Wait until every (bank_id, operation_id) has finished; raise if any did not complete.

        Walks the list in submission order, polling only the oldest unfinished operation, so
        the server sees about one request per poll interval however many are queued.
        """
        for bank_id, operation_id in pending:
            while True:
                operation = await self.operation_status(bank_id, operation_id)
                status = str(operation.get("status"))
                if status in TERMINAL:
                    break
                await asyncio.sleep(POLL_INTERVAL_S)
            if status != "completed":
                raise BenchError(
                    f"operation {operation_id} of {bank_id} {status}: "
                    f"{operation.get('error_message')}"
                )

    async def list_memories(self, bank_id: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        while True:
            response = await self._client.get(
                f"{API}/{bank_id}/memories/list",
                params={"limit": LIST_PAGE, "offset": len(items)},
            )
            page = _check(response, f"list memories of {bank_id}")
            batch = page.get("items") or []
            items.extend(batch)
            if not batch or len(items) >= int(page.get("total", 0)):
                return items

    async def recall(
        self,
        bank_id: str,
        query: str,
        *,
        query_timestamp: datetime,
        max_tokens: int,
        budget: str,
    ) -> Recalled | None:
        """None when the server has no recall route (404/405 on a bank known to exist)."""
        body = {
            "query": query,
            "budget": budget,
            "max_tokens": max_tokens,
            "query_timestamp": query_timestamp.isoformat(),
            "include": {"entities": None, "chunks": None, "source_facts": None},
        }
        started = time.perf_counter()
        response = await self._client.post(f"{API}/{bank_id}/memories/recall", json=body)
        seconds = time.perf_counter() - started
        if response.status_code in (404, 405) and "bank" not in response.text.lower():
            return None
        results = _check(response, f"recall on {bank_id}").get("results")
        if not isinstance(results, list):
            raise BenchError(f"recall on {bank_id}: no results list")
        return Recalled(results, seconds)
