"""Waiting for an operation (a retain, import, export, consolidation, refresh) to finish, as a
client polling the v1 API does."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

FINISHED = ("completed", "failed", "cancelled")
POLL_S = 0.1


async def finished(
    api: httpx.AsyncClient, url: str, timeout: float = 120.0, **request: Any
) -> dict[str, Any]:
    """The body at `url` once its status is final (`request`: extra arguments of the GET,
    such as headers). The timeout only turns a hang into a message."""
    for _ in range(int(timeout / POLL_S)):
        response = await api.get(url, **request)
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        if body["status"] in FINISHED:
            return body
        await asyncio.sleep(POLL_S)
    raise AssertionError(f"{url} did not finish within {timeout:.0f} s")


async def finished_operation(
    api: httpx.AsyncClient, bank: str, operation_id: str, timeout: float = 120.0
) -> dict[str, Any]:
    """The bank's operation once it completed, failed or was cancelled."""
    return await finished(api, f"/v1/default/banks/{bank}/operations/{operation_id}", timeout)


async def completed_operation(
    api: httpx.AsyncClient, bank: str, operation_id: str, timeout: float = 120.0
) -> dict[str, Any]:
    """The bank's operation, which must have completed."""
    body = await finished_operation(api, bank, operation_id, timeout)
    assert body["status"] == "completed", body
    return body


async def finished_import(
    api: httpx.AsyncClient, operation_id: str, timeout: float = 120.0
) -> dict[str, Any]:
    """An import started through POST /v1/default/imports, once it is over."""
    return await finished(api, f"/v1/default/imports/{operation_id}", timeout)
