"""Every model call is logged with its bank, operation, model, tokens, latency and outcome;
the log is listed and counted per bank; `POST .../health/llm` makes one call and reports."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from support.fake_openai import FakeOpenAI, HTTPError, Reply, ToolCall, ToolCalls
from support.openapi import check

from engine.settings import LLMSettings

BASE = "/v1/default/banks"


def answer(body: dict[str, Any]) -> Reply | ToolCalls:
    if body.get("tools"):
        return ToolCalls((ToolCall("done", json.dumps({"answer": "Lisbon.", "ids": []})),))
    return Reply("OK")


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(responder=answer) as server:
        yield server


@pytest.fixture
def llm_settings(fake: FakeOpenAI) -> LLMSettings:
    return LLMSettings(api_key="test-key", base_url=fake.base_url, model="fake", timeout_s=30)


async def test_reflect_calls_are_logged_and_health_checks(
    api: httpx.AsyncClient, bank_id: str, fake: FakeOpenAI
) -> None:
    doc = (await api.get("/openapi.json")).json()
    bank = f"{BASE}/{bank_id}"
    settings = {"extraction_mode": "local", "enable_observations": False}
    assert (await api.put(bank, json=settings)).status_code == 200
    before = len(fake.requests)
    reflected = await api.post(f"{bank}/reflect", json={"query": "Where does Ana live?"})
    assert reflected.status_code == 200, reflected.text
    calls = len(fake.requests) - before
    logged = check(doc, await api.get(f"{bank}/llm-requests"))
    reflect_rows = [r for r in logged["items"] if r["operation"] == "reflect"]
    assert len(reflect_rows) == calls >= 1
    row = reflect_rows[0]
    assert row["status"] == "success" and row["model"] == "fake" and row["bank_id"] == bank_id
    assert row["input_tokens"] > 0 and row["duration_ms"] >= 0 and row["error"] is None

    healthy = check(doc, await api.post(f"{bank}/health/llm"))
    assert {o["operation"]: o["status"] for o in healthy["operations"]} == {
        "retain": "not_used",  # the bank extracts locally
        "consolidation": "ok",
        "reflect": "ok",
    }
    fake.push(HTTPError(400, "model does not exist", "invalid_request_error"))
    sick = check(doc, await api.post(f"{bank}/health/llm"))
    assert sick["operations"][2]["status"] == "error"
    assert "model does not exist" in sick["operations"][2]["error"]

    failed = check(doc, await api.get(f"{bank}/llm-requests", params={"status": "error"}))
    assert failed["total"] == 1 and failed["items"][0]["operation"] == "health"
    stats = check(doc, await api.get(f"{bank}/llm-requests/stats", params={"period": "1h"}))
    statuses: dict[str, int] = {}
    for bucket in stats["buckets"]:
        for status, count in bucket["statuses"].items():
            statuses[status] = statuses.get(status, 0) + count
    assert statuses == {"success": calls + 1, "error": 1}
    other = await api.get(f"{BASE}/other-{bank_id}/llm-requests")
    assert other.status_code == 404
