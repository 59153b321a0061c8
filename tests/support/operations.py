"""Waiting for an operation (a retain, import, export, consolidation, refresh) to finish, as a
client polling the v1 API does."""

from __future__ import annotations

from typing import Any

import httpx

from support.waiting import WAIT_S, until

FINISHED = ("completed", "failed", "cancelled")
BANKS = "/v1/default/banks"


async def body_of(api: httpx.AsyncClient, url: str, **request: Any) -> dict[str, Any]:
    """The JSON body of a GET that must succeed."""
    response = await api.get(url, **request)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def finished(
    api: httpx.AsyncClient, url: str, timeout: float = WAIT_S, **request: Any
) -> dict[str, Any]:
    """The body at `url` once its status is final (`request`: extra arguments of the GET,
    such as headers). The timeout only turns a hang into a message."""
    return await until(
        lambda: body_of(api, url, **request),
        lambda body: body["status"] in FINISHED,
        f"{url} finished",
        timeout=timeout,
    )


async def finished_operation(
    api: httpx.AsyncClient, bank: str, operation_id: str, timeout: float = WAIT_S
) -> dict[str, Any]:
    """The bank's operation once it completed, failed or was cancelled."""
    return await finished(api, f"{BANKS}/{bank}/operations/{operation_id}", timeout)


async def completed_operation(
    api: httpx.AsyncClient, bank: str, operation_id: str, timeout: float = WAIT_S
) -> dict[str, Any]:
    """The bank's operation, which must have completed."""
    body = await finished_operation(api, bank, operation_id, timeout)
    assert body["status"] == "completed", body
    return body


async def finished_import(
    api: httpx.AsyncClient, operation_id: str, timeout: float = WAIT_S
) -> dict[str, Any]:
    """An import started through POST /v1/default/imports, once it is over."""
    return await finished(api, f"/v1/default/imports/{operation_id}", timeout)


async def consolidated(api: httpx.AsyncClient, bank: str, timeout: float = WAIT_S) -> None:
    """Until no fact of the bank waits for consolidation and its latest run has finished,
    which must have completed."""
    body = await until(
        lambda: body_of(api, f"{BANKS}/{bank}/consolidation"),
        lambda body: (
            body["pending_facts"] == 0 and body["operation_status"] in ("completed", "failed")
        ),
        f"consolidation of {bank} finished",
        timeout=timeout,
    )
    assert body["operation_status"] == "completed", body
