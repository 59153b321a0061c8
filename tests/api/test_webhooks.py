"""Webhooks: a retain's (and a consolidation's) completion is delivered to a local receiver,
signed with HMAC-SHA256, retried when the receiver fails, and recorded as a delivery."""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from support.openapi import check
from support.operations import body_of
from support.serve import serve
from support.waiting import until

BASE = "/v1/default/banks"
SECRET = "s3cret"


class Receiver:
    """Answers 500 to the first `failures` posts, then 200; keeps what it got."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.received: list[tuple[dict[str, str], bytes]] = []

    async def hook(self, request: Request) -> Response:
        self.received.append((dict(request.headers), await request.body()))
        if len(self.received) <= self.failures:
            return JSONResponse({"error": "not now"}, status_code=500)
        return JSONResponse({"ok": True})

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/hook", self.hook, methods=["POST"])])


async def settled(api: httpx.AsyncClient, path: str) -> dict[str, Any]:
    return await until(
        lambda: body_of(api, path),
        lambda body: body["items"] and body["items"][0]["status"] != "pending",
        "the delivery settled",
        every=0.05,
    )


async def test_retain_completion_is_delivered_signed_after_a_retry(
    api: httpx.AsyncClient, bank_id: str
) -> None:
    doc = (await api.get("/openapi.json")).json()
    bank = f"{BASE}/{bank_id}"
    settings = {"extraction_mode": "local", "enable_observations": False}
    assert (await api.put(bank, json=settings)).status_code == 200
    receiver = Receiver(failures=1)
    async with serve(receiver.app()) as url:
        created = await api.post(
            f"{bank}/webhooks",
            json={"url": f"{url}/hook", "secret": SECRET, "event_types": ["retain.completed"]},
        )
        assert created.status_code == 201
        hook = check(doc, created)
        assert hook["secret"] == "********"  # write-only
        listed = check(doc, await api.get(f"{bank}/webhooks"))
        assert [h["id"] for h in listed["items"]] == [hook["id"]]

        retained = await api.post(
            f"{bank}/memories",
            json={"items": [{"content": "Ana adopted a cat.", "document_id": "d1"}]},
        )
        assert retained.status_code == 200, retained.text
        operation_id = retained.json()["operation_id"]
        deliveries = await settled(api, f"{bank}/webhooks/{hook['id']}/deliveries")

    path = f"{bank}/webhooks/{hook['id']}/deliveries"
    delivery = check(doc, await api.get(path))["items"][0]
    assert delivery == deliveries["items"][0]
    assert delivery["status"] == "delivered" and delivery["attempts"] == 2
    assert delivery["last_response_status"] == 200 and delivery["event_type"] == "retain.completed"
    assert len(receiver.received) == 2
    headers, body = receiver.received[-1]
    expected = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(headers["x-engram-signature"], expected)
    payload = json.loads(body)
    assert payload["event"] == "retain.completed" and payload["bank_id"] == bank_id
    assert payload["data"]["operation_id"] == operation_id
    assert payload["data"]["document_ids"] == ["d1"] and payload["data"]["facts_added"] >= 1


async def test_webhook_validation_and_management(api: httpx.AsyncClient, bank_id: str) -> None:
    doc = (await api.get("/openapi.json")).json()
    bank = f"{BASE}/{bank_id}"
    bad_url = await api.post(f"{bank}/webhooks", json={"url": "ftp://x"})
    assert bad_url.status_code == 400 and bad_url.json()["field"] == "url"
    bad_event = await api.post(
        f"{bank}/webhooks", json={"url": "http://127.0.0.1:9/h", "event_types": ["nope"]}
    )
    assert bad_event.status_code == 400 and bad_event.json()["field"] == "event_types"
    hook = check(doc, await api.post(f"{bank}/webhooks", json={"url": "http://127.0.0.1:9/h"}))
    assert hook["secret"] is None and set(hook["event_types"]) == {
        "retain.completed",
        "retain.failed",
        "consolidation.completed",
        "consolidation.failed",
    }
    off = check(doc, await api.patch(f"{bank}/webhooks/{hook['id']}", json={"enabled": False}))
    assert off["enabled"] is False and off["url"] == "http://127.0.0.1:9/h"
    check(doc, await api.delete(f"{bank}/webhooks/{hook['id']}"))
    assert (await api.delete(f"{bank}/webhooks/{hook['id']}")).status_code == 404


async def test_consolidation_completion_is_delivered(api: httpx.AsyncClient, bank_id: str) -> None:
    bank = f"{BASE}/{bank_id}"
    settings = {"extraction_mode": "local", "enable_observations": True}
    assert (await api.put(bank, json=settings)).status_code == 200
    receiver = Receiver(failures=0)
    async with serve(receiver.app()) as url:
        body = {"url": f"{url}/hook", "event_types": ["consolidation.completed"]}
        hook = (await api.post(f"{bank}/webhooks", json=body)).json()
        items = [{"content": "Ana loves figs.", "document_id": "d1"}]
        assert (await api.post(f"{bank}/memories", json={"items": items})).status_code == 200
        deliveries = await settled(api, f"{bank}/webhooks/{hook['id']}/deliveries")
    assert [d["event_type"] for d in deliveries["items"]] == ["consolidation.completed"]
    assert deliveries["items"][0]["status"] == "delivered"
    payload = json.loads(receiver.received[-1][1])
    assert payload["event"] == "consolidation.completed" and payload["bank_id"] == bank_id
    assert payload["data"]["operation_id"].startswith("consolidation-")
    assert payload["data"]["facts"] >= 1
