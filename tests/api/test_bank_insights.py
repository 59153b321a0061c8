"""The routes that fill in Hindsight's surface: stats by type, memories over time, tags,
profile and background, directives (and a directive reaching reflect's prompt). Each answer
is also checked against the OpenAPI document."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from support.fake_openai import FakeOpenAI, ToolCall, ToolCalls
from support.openapi import check

from engine.settings import LLMSettings

BASE = "/v1/default/banks"


def done(body: dict[str, Any]) -> ToolCalls:
    return ToolCalls((ToolCall("done", json.dumps({"answer": "Noted.", "ids": []})),))


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(responder=done) as server:
        yield server


@pytest.fixture
def llm_settings(fake: FakeOpenAI) -> LLMSettings:
    return LLMSettings(api_key="test-key", base_url=fake.base_url, model="fake", timeout_s=30)


async def filled_bank(api: httpx.AsyncClient, bank: str) -> None:
    settings = {"extraction_mode": "local", "enable_observations": False}
    assert (await api.put(bank, json=settings)).status_code == 200
    items = [
        {"content": "Ana: I adopted a cat named Miso.", "document_id": "a", "tags": ["user:ana"]},
        {"content": "Ana: Miso likes tuna.", "document_id": "b", "tags": ["user:ana", "pets"]},
        {"content": "The Tagus flows through Lisbon.", "document_id": "c", "tags": ["geo"]},
    ]
    response = await api.post(f"{bank}/memories", json={"items": items})
    assert response.status_code == 200, response.text


async def test_stats_timeseries_and_tags(api: httpx.AsyncClient, bank_id: str) -> None:
    doc = (await api.get("/openapi.json")).json()
    bank = f"{BASE}/{bank_id}"
    await filled_bank(api, bank)
    stats = check(doc, await api.get(f"{bank}/stats"))
    by_type = stats["nodes_by_fact_type"]
    assert sum(by_type.values()) == stats["total_nodes"] == 3 and set(by_type) <= {
        "world",
        "experience",
    }
    assert sum(stats["links_by_link_type"].values()) == stats["total_links"] > 0
    assert sum(stats["links_by_fact_type"].values()) == stats["total_links"]
    assert stats["operations_by_status"] == {"completed": 1} and stats["pending_operations"] == 0
    assert stats["last_memory_write_at"] is not None

    series = check(doc, await api.get(f"{bank}/stats/memories-timeseries", params={"period": "1d"}))
    assert series["trunc"] == "hour" and len(series["buckets"]) in (24, 25)
    for kind in ("world", "experience"):
        assert sum(b[kind] for b in series["buckets"]) == by_type.get(kind, 0)
    by_event = await api.get(
        f"{bank}/stats/memories-timeseries", params={"period": "90d", "time_field": "bogus"}
    )
    assert check(doc, by_event)["time_field"] == "created_at"
    bad = await api.get(f"{bank}/stats/memories-timeseries", params={"period": "2y"})
    assert bad.status_code == 400 and bad.json()["field"] == "period"

    tags = check(doc, await api.get(f"{bank}/tags"))
    assert {(t["tag"], t["count"]) for t in tags["items"]} == {
        ("user:ana", 2),
        ("pets", 1),
        ("geo", 1),
    }
    assert tags["items"][0] == {"tag": "user:ana", "count": 2} and tags["total"] == 3
    users = check(doc, await api.get(f"{bank}/tags", params={"q": "USER:*"}))
    assert [t["tag"] for t in users["items"]] == ["user:ana"]
    assert check(doc, await api.get(f"{bank}/tags", params={"q": "user_*"}))["total"] == 0


async def test_profile_background_and_directives(
    api: httpx.AsyncClient, bank_id: str, fake: FakeOpenAI
) -> None:
    doc = (await api.get("/openapi.json")).json()
    bank = f"{BASE}/{bank_id}"
    await filled_bank(api, bank)
    profile = check(doc, await api.put(f"{bank}/profile", json={"disposition": {"empathy": 5}}))
    assert profile["disposition"]["empathy"] == 5
    bad = await api.put(f"{bank}/profile", json={"disposition": {"empathy": 9}})
    assert bad.status_code == 422 and "empathy" in bad.json()["field"]
    check(doc, await api.post(f"{bank}/background", json={"content": "Ana's home assistant."}))
    grown = check(doc, await api.post(f"{bank}/background", json={"content": "Be brief."}))
    assert grown["mission"] == "Ana's home assistant.\n\nBe brief."

    made = check(
        doc,
        await api.post(
            f"{bank}/directives",
            json={"name": "Units", "content": "Always answer in metric units.", "priority": 5},
        ),
    )
    tagged = check(
        doc,
        await api.post(
            f"{bank}/directives",
            json={"name": "Pets", "content": "Mention pets by name.", "tags": ["pets"]},
        ),
    )
    listed = check(doc, await api.get(f"{bank}/directives"))
    assert [d["id"] for d in listed["items"]] == [made["id"], tagged["id"]]  # by priority
    strict = await api.get(
        f"{bank}/directives", params={"tags": "pets", "tags_match": "any_strict"}
    )
    assert [d["id"] for d in check(doc, strict)["items"]] == [tagged["id"]]
    changed = check(
        doc, await api.patch(f"{bank}/directives/{made['id']}", json={"name": None, "priority": 9})
    )
    assert changed["name"] == "Units" and changed["priority"] == 9
    check(doc, await api.get(f"{bank}/directives/{made['id']}"))
    missing = await api.get(f"{bank}/directives/nope")
    assert missing.status_code == 404
    empty = await api.post(f"{bank}/directives", json={"name": "x", "content": "  "})
    assert empty.status_code == 400 and empty.json()["field"] == "content"

    before = len(fake.requests)
    answer = await api.post(f"{bank}/reflect", json={"query": "How heavy is Miso?"})
    assert answer.status_code == 200, answer.text
    prompt = json.dumps(fake.requests[before]["messages"])
    assert "Always answer in metric units." in prompt
    assert "Mention pets by name." not in prompt  # tag-scoped: not applied to untagged reflect
    check(doc, await api.delete(f"{bank}/directives/{made['id']}"))
    assert (await api.get(f"{bank}/directives/{made['id']}")).status_code == 404


async def test_document_tags_and_operation_delete(api: httpx.AsyncClient, bank_id: str) -> None:
    doc = (await api.get("/openapi.json")).json()
    bank = f"{BASE}/{bank_id}"
    await filled_bank(api, bank)
    changed = check(doc, await api.patch(f"{bank}/documents/a", json={"tags": ["user:ana", "x"]}))
    assert changed["memory_units_updated"] >= 1
    facts = (await api.get(f"{bank}/memories/list", params={"document_id": "a"})).json()["items"]
    assert all(f["tags"] == ["user:ana", "x"] for f in facts)
    assert (await api.get(f"{bank}/documents/a")).json()["tags"] == ["user:ana", "x"]
    assert (await api.patch(f"{bank}/documents/nope", json={"tags": []})).status_code == 404

    operations = (await api.get(f"{bank}/operations")).json()["operations"]
    operation_id = operations[0]["id"]
    check(doc, await api.delete(f"{bank}/operations/{operation_id}/delete"))
    assert (await api.get(f"{bank}/operations/{operation_id}")).status_code == 404
    gone = await api.delete(f"{bank}/operations/{operation_id}/delete")
    assert gone.status_code == 404
