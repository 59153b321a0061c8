"""Import through the HTTP API, run by a real worker on the real Temporal dev server."""

from __future__ import annotations

import json
from typing import Any

import httpx
from support.operations import finished_import

BASE = "/v1/default/banks"


def chat_lines(conversation: str, days: int, start_day: int = 1) -> list[str]:
    lines = []
    for day in range(start_day, start_day + days):
        stamp = f"2024-03-{day:02d}T10:00:00Z"
        lines.append(
            json.dumps(
                {
                    "conversation_id": conversation,
                    "role": "user",
                    "content": f"I visited museum number {day} in Lisbon yesterday with Ana.",
                    "timestamp": stamp,
                }
            )
        )
        lines.append(
            json.dumps(
                {
                    "conversation_id": conversation,
                    "speaker": "Ana",
                    "content": f"I loved the painting of boat {day} at the museum.",
                    "timestamp": stamp,
                }
            )
        )
    return lines


async def start(api: httpx.AsyncClient, bank: str, body: dict[str, Any]) -> dict[str, Any]:
    response = await api.post(f"{BASE}/{bank}/import", json=body)
    assert response.status_code == 202, response.text
    result: dict[str, Any] = response.json()
    return result


async def facts(api: httpx.AsyncClient, bank: str) -> dict[str, str]:
    response = await api.get(f"{BASE}/{bank}/memories/list", params={"limit": "1000"})
    assert response.status_code == 200, response.text
    # Observations (the consolidation an import requests) come on their own schedule.
    return {
        item["id"]: item["text"]
        for item in response.json()["items"]
        if item["fact_type"] != "observation"
    }


async def test_a_jsonl_import_stores_one_document_per_conversation(
    api: httpx.AsyncClient, bank_id: str
) -> None:
    content = "\n".join(chat_lines("trip", 3) + chat_lines("home", 2))
    started = await start(api, bank_id, {"content": content, "name": "chat.jsonl"})
    assert started["formats"] == ["jsonl"]
    assert (started["documents"], started["items"], started["skipped"]) == (2, 10, 0)
    final = await finished_import(api, started["operation_id"])
    assert final["status"] == "completed", final
    progress = final["progress"]
    assert progress["documents_done"] == progress["documents_total"] == 2
    assert progress["items_done"] == progress["items_total"] == 10
    stored = await facts(api, bank_id)
    assert progress["facts_added"] == len(stored) > 0
    assert any("User visited museum number 2" in t for t in stored.values()), stored
    documents = (await api.get(f"{BASE}/{bank_id}/documents")).json()["items"]
    assert sorted(d["id"] for d in documents) == ["home", "trip"]
    operation = (await api.get(f"{BASE}/{bank_id}/operations/{started['operation_id']}")).json()
    assert operation["task_type"] == "import"
    assert operation["progress"]["detail"]["facts_added"] == len(stored)
    assert operation["result_metadata"]["documents"] == 2


async def test_importing_the_same_file_twice_changes_nothing(
    api: httpx.AsyncClient, bank_id: str
) -> None:
    content = "\n".join(chat_lines("trip", 3))
    first = await finished_import(
        api, (await start(api, bank_id, {"content": content}))["operation_id"]
    )
    before = await facts(api, bank_id)
    second = await finished_import(
        api, (await start(api, bank_id, {"content": content}))["operation_id"]
    )
    assert first["status"] == second["status"] == "completed"
    assert second["result"]["facts_added"] == 0 and second["result"]["facts_removed"] == 0
    assert await facts(api, bank_id) == before


async def test_an_extended_export_only_adds_what_is_new(
    api: httpx.AsyncClient, bank_id: str
) -> None:
    old = chat_lines("trip", 3)
    await finished_import(
        api, (await start(api, bank_id, {"content": "\n".join(old)}))["operation_id"]
    )
    before = await facts(api, bank_id)
    extended = old + chat_lines("trip", 2, start_day=10)
    final = await finished_import(
        api, (await start(api, bank_id, {"content": "\n".join(extended)}))["operation_id"]
    )
    after = await facts(api, bank_id)
    assert final["result"]["facts_removed"] == 0
    assert set(before) < set(after)  # every old fact kept as it was, by id
    new = [after[i] for i in set(after) - set(before)]
    assert new and all("10" in t or "11" in t for t in new), new


async def test_malformed_lines_are_reported_with_their_position_and_skipped(
    api: httpx.AsyncClient, bank_id: str
) -> None:
    lines = chat_lines("trip", 2)
    lines.insert(1, "{not json")
    lines.append(json.dumps({"role": "user"}))
    started = await start(api, bank_id, {"content": "\n".join(lines), "name": "c.jsonl"})
    assert started["items"] == 4 and started["skipped"] == 2
    positions = [(e["position"], e["message"]) for e in started["errors"]]
    assert positions[0][0] == "c.jsonl line 2" and "not valid JSON" in positions[0][1]
    assert positions[1] == ("c.jsonl line 6", "has no content")
    final = await finished_import(api, started["operation_id"])
    assert final["status"] == "completed"
    assert final["skipped"] == 2 and final["errors"][0]["position"] == "c.jsonl line 2"


async def test_on_error_stop_rejects_the_import_and_names_the_record(
    api: httpx.AsyncClient, bank_id: str
) -> None:
    lines = chat_lines("trip", 2)
    lines.insert(2, '{"role": "user", "content": "hi", "timestamp": "not a date"}')
    response = await api.post(
        f"{BASE}/{bank_id}/import",
        json={"content": "\n".join(lines), "name": "c.jsonl", "on_error": "stop"},
    )
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["field"] == "content"
    assert "c.jsonl line 3" in body["detail"] and "timestamp" in body["detail"]
    assert (await api.get(f"{BASE}/{bank_id}/documents")).status_code == 404


async def test_bad_import_requests_name_the_field(api: httpx.AsyncClient, bank_id: str) -> None:
    both = await api.post(f"{BASE}/{bank_id}/import", json={"content": "x", "files": []})
    assert both.status_code == 400 and both.json()["field"] == "content"
    fmt = await api.post(f"{BASE}/{bank_id}/import", json={"content": "x", "format": "csv"})
    assert fmt.status_code == 422 and fmt.json()["field"] == "format"
    empty = await api.post(f"{BASE}/{bank_id}/import", json={"content": "   "})
    assert empty.status_code == 400 and "nothing to import" in empty.json()["detail"]
    missing = await api.get("/v1/default/imports/nope")
    assert missing.status_code == 404
