"""Every error answers in one JSON format, a crash included, and an overloaded server sheds
load with a 503 and Retry-After instead of queueing."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from server.app import create_app
from server.services import Services

BASE = "/v1/default/banks"


def no_services() -> AbstractAsyncContextManager[Services]:
    raise AssertionError("the lifespan does not run under ASGITransport")


async def client_of(app: Starlette) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://engram.test") as client:
        yield client


async def boom(request: Request) -> Response:
    raise RuntimeError("a bug nobody mapped")


async def test_starlette_404_and_405_answer_in_the_error_format(
    plain_api: httpx.AsyncClient,
) -> None:
    response = await plain_api.get("/v1/no/such/route")
    assert response.status_code == 404
    assert response.json() == {"detail": "no such route: GET /v1/no/such/route"}
    response = await plain_api.post("/health")
    assert response.status_code == 405
    assert response.json()["detail"] == "POST is not allowed on /health"
    assert "GET" in response.headers["allow"]


async def test_validation_messages_are_in_the_callers_words(
    plain_api: httpx.AsyncClient, bank_id: str
) -> None:
    response = await plain_api.post(f"{BASE}/{bank_id}/memories", json={"items": [{"content": ""}]})
    assert response.status_code == 422
    body = response.json()
    assert body["detail"] == "items.0.content: must not be empty"
    assert body["field"] == "items.0.content"
    assert "Error" not in response.text


async def test_an_unexpected_error_is_a_json_500_with_an_id_in_the_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = create_app(no_services)
    app.router.routes.append(Route("/v1/boom", boom, methods=["GET"]))
    with caplog.at_level(logging.ERROR, logger="engram.server"):
        async for client in client_of(app):
            response = await client.get("/v1/boom")
    assert response.status_code == 500
    body = response.json()
    assert "RuntimeError" not in body["detail"]
    assert body["error_id"] in body["detail"]
    logged = [r for r in caplog.records if body["error_id"] in r.getMessage()]
    assert len(logged) == 1
    assert logged[0].exc_info is not None
    assert "a bug nobody mapped" in str(logged[0].exc_info[1])


async def test_requests_over_the_admission_limit_get_503_and_retry_after() -> None:
    app = create_app(no_services, max_in_flight=2)
    entered = asyncio.Semaphore(0)
    release = asyncio.Event()

    async def slow(request: Request) -> Response:
        entered.release()
        await release.wait()
        return JSONResponse({"ok": True})

    app.router.routes.append(Route("/v1/slow", slow, methods=["GET"]))
    async for client in client_of(app):
        held = [asyncio.create_task(client.get("/v1/slow")) for _ in range(2)]
        for _ in held:
            await entered.acquire()
        shed = await client.get("/v1/slow")
        assert shed.status_code == 503
        assert shed.headers["retry-after"] == "1"
        assert "busy" in shed.json()["detail"]
        probe = await client.get("/health")  # probes are never shed
        assert probe.status_code == 200
        release.set()
        assert [r.status_code for r in await asyncio.gather(*held)] == [200, 200]
        again = await client.get("/v1/slow")
        assert again.status_code == 200
