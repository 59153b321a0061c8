"""Retain through the HTTP API, run by a real worker on the real Temporal dev server."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from support.operations import finished_operation

BASE = "/v1/default/banks"


async def retain(api: httpx.AsyncClient, bank: str, body: dict[str, Any]) -> dict[str, Any]:
    response = await api.post(f"{BASE}/{bank}/memories", json=body)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


async def memories(api: httpx.AsyncClient, bank: str, **params: str) -> list[dict[str, Any]]:
    response = await api.get(f"{BASE}/{bank}/memories/list", params={"limit": "1000", **params})
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items


async def test_retain_stores_a_fact_with_absolute_dates_and_entities(
    api: httpx.AsyncClient, bank_id: str
) -> None:
    result = await retain(
        api,
        bank_id,
        {
            "items": [
                {
                    "content": "Caroline: I went to a LGBTQ support group yesterday.",
                    "timestamp": "2023-05-08T13:56:00+00:00",
                    "document_id": "chat-1",
                    "metadata": {"dia_id": "D1:3"},
                }
            ]
        },
    )
    assert result["async"] is False
    assert result["facts_added"] >= 1
    facts = await memories(api, bank_id)
    fact = next(f for f in facts if "support group" in f["text"])
    assert "Caroline" in fact["text"]
    assert fact["occurred_start"].startswith("2023-05-07")
    assert fact["mentioned_at"].startswith("2023-05-08")
    assert fact["metadata"] == {"dia_id": "D1:3"}
    assert "Caroline" in fact["entities"]
    assert fact["document_id"] == "chat-1"
    entities = (await api.get(f"{BASE}/{bank_id}/entities")).json()["items"]
    assert "Caroline" in [e["canonical_name"] for e in entities]


async def test_resending_a_document_duplicates_nothing(
    api: httpx.AsyncClient, bank_id: str
) -> None:
    body = {
        "items": [
            {
                "content": "Melanie: I painted a lake sunrise last week. My kids loved it.",
                "timestamp": "2023-05-08T10:00:00Z",
                "document_id": "doc-a",
            }
        ]
    }
    first = await retain(api, bank_id, body)
    before = await memories(api, bank_id)
    second = await retain(api, bank_id, body)
    after = await memories(api, bank_id)
    assert first["facts_added"] == len(before) > 0
    assert second["facts_added"] == 0 and second["facts_removed"] == 0
    assert sorted(f["id"] for f in after) == sorted(f["id"] for f in before)


async def test_items_without_document_id_are_not_duplicated_on_resend(
    api: httpx.AsyncClient, bank_id: str
) -> None:
    body = {"items": [{"content": "Jon opened a dance studio in Berlin.", "timestamp": "unset"}]}
    await retain(api, bank_id, body)
    await retain(api, bank_id, body)
    facts = await memories(api, bank_id)
    assert len(facts) == 1
    assert facts[0]["mentioned_at"] is None


async def test_one_changed_paragraph_changes_only_its_chunk(
    api: httpx.AsyncClient, bank_id: str
) -> None:
    put = await api.put(f"{BASE}/{bank_id}", json={"retain_chunk_size": 200})
    assert put.status_code == 200, put.text
    paragraphs = [
        "Alice moved to Lisbon in 2019 and works as a data engineer at Feedzai.",
        "Bob adopted a beagle named Pixel from a shelter in Porto.",
        "Carla is training for the Berlin marathon and runs five times a week.",
        "Dan collects vintage synthesizers and owns a Moog from 1974.",
    ]
    doc = {"document_id": "notes", "timestamp": "2024-02-01T09:00:00Z"}
    await retain(api, bank_id, {"items": [{"content": "\n\n".join(paragraphs), **doc}]})
    before = {f["id"]: f for f in await memories(api, bank_id)}
    paragraphs[2] = "Carla gave up running and took up rock climbing in Sintra."
    result = await retain(api, bank_id, {"items": [{"content": "\n\n".join(paragraphs), **doc}]})
    after = {f["id"]: f for f in await memories(api, bank_id)}
    assert result["chunks_removed"] == 1 and result["chunks_added"] == 1
    changed_chunk = next(f["chunk_id"] for f in before.values() if "marathon" in f["text"])
    untouched = {i for i, f in before.items() if f["chunk_id"] != changed_chunk}
    assert untouched and untouched <= set(after)  # same ids: not re-extracted
    assert not any(f["chunk_id"] == changed_chunk for f in after.values())
    assert any("climbing" in f["text"] for f in after.values())
    assert not any("marathon" in f["text"] for f in after.values())


async def test_append_mode_adds_to_a_document(api: httpx.AsyncClient, bank_id: str) -> None:
    doc = {"document_id": "journal", "timestamp": "2024-03-01T09:00:00Z"}
    await retain(api, bank_id, {"items": [{"content": "Erin started learning Rust.", **doc}]})
    await retain(
        api,
        bank_id,
        {"items": [{"content": "Erin shipped her first crate.", "update_mode": "append", **doc}]},
    )
    texts = [f["text"] for f in await memories(api, bank_id, document_id="journal")]
    assert any("Rust" in t for t in texts) and any("crate" in t for t in texts)
    document = (await api.get(f"{BASE}/{bank_id}/documents/journal")).json()
    assert "Rust" in document["original_text"] and "crate" in document["original_text"]


async def test_async_retain_reports_its_operation(api: httpx.AsyncClient, bank_id: str) -> None:
    op = f"op-{bank_id}"
    body = {
        "items": [{"content": "Farid visited Kyoto in April 2022.", "timestamp": "2022-05-01"}],
        "async": True,
        "operation_id": op,
    }
    result = await retain(api, bank_id, body)
    assert result == {
        "success": True,
        "bank_id": bank_id,
        "items_count": 1,
        "operation_id": op,
        "async": True,
    }
    again = await retain(api, bank_id, body)
    assert again["operation_id"] == op
    final = await finished_operation(api, bank_id, op)
    assert final["status"] == "completed", final
    assert final["result_metadata"]["facts_added"] >= 1
    listed = (await api.get(f"{BASE}/{bank_id}/operations")).json()
    # Consolidation may have recorded an operation of its own after the retain.
    retains = [o["id"] for o in listed["operations"] if o["task_type"] == "retain"]
    assert retains == [op]
    assert len(await memories(api, bank_id)) == final["result_metadata"]["facts_added"]


async def test_operation_id_reused_for_other_work_is_a_conflict(
    api: httpx.AsyncClient, bank_id: str
) -> None:
    op = f"op-conflict-{bank_id}"
    await retain(
        api, bank_id, {"items": [{"content": "Gia likes tea."}], "async": True, "operation_id": op}
    )
    response = await api.post(
        f"{BASE}/{bank_id}/memories",
        json={"items": [{"content": "Gia likes coffee."}], "async": True, "operation_id": op},
    )
    assert response.status_code == 409
    assert op in response.json()["detail"]
    await finished_operation(api, bank_id, op)


async def test_concurrent_retains_of_one_document_never_interleave(
    api: httpx.AsyncClient, bank_id: str
) -> None:
    versions = [
        "\n\n".join(f"Version {v}: Hana note {i} about project Orion." for i in range(6))
        for v in ("one", "two", "three")
    ]
    await asyncio.gather(
        *(
            retain(api, bank_id, {"items": [{"content": text, "document_id": "shared"}]})
            for text in versions
        )
    )
    texts = [f["text"] for f in await memories(api, bank_id, document_id="shared")]
    winners = {
        word for word in ("one", "two", "three") if any(f"Version {word}" in t for t in texts)
    }
    assert len(winners) == 1, texts
    chunks = (await api.get(f"{BASE}/{bank_id}/documents/shared/chunks")).json()
    assert all(f"Version {winners.pop()}" in c["chunk_text"] for c in chunks["items"])


async def test_deleting_a_document_removes_its_facts_links_and_orphan_entities(
    api: httpx.AsyncClient, bank_id: str
) -> None:
    await retain(
        api,
        bank_id,
        {
            "items": [
                {"content": "Ivo met Zelda at the Louvre in Paris.", "document_id": "d1"},
                {"content": "Ivo bought a bicycle.", "document_id": "d2"},
            ]
        },
    )
    response = await api.delete(f"{BASE}/{bank_id}/documents/d1")
    assert response.status_code == 200
    assert response.json()["memory_units_deleted"] >= 1
    remaining = await memories(api, bank_id)
    assert remaining and all(f["document_id"] == "d2" for f in remaining)
    names = [
        e["canonical_name"] for e in (await api.get(f"{BASE}/{bank_id}/entities")).json()["items"]
    ]
    assert "Ivo" in names and "Zelda" not in names
    assert (await api.get(f"{BASE}/{bank_id}/documents/d1")).status_code == 404


async def test_document_ids_with_slashes_can_be_read_and_deleted(
    api: httpx.AsyncClient, bank_id: str
) -> None:
    document_id = "notes/2024/june.md"
    await retain(
        api, bank_id, {"items": [{"content": "Ivo repaired the boat.", "document_id": document_id}]}
    )
    for path in (document_id, document_id.replace("/", "%2F")):
        response = await api.get(f"{BASE}/{bank_id}/documents/{path}")
        assert response.status_code == 200, response.text
        assert response.json()["id"] == document_id
    chunks = (await api.get(f"{BASE}/{bank_id}/documents/{document_id}/chunks")).json()
    assert [c["document_id"] for c in chunks["items"]] == [document_id]
    assert (await api.delete(f"{BASE}/{bank_id}/documents/{document_id}")).status_code == 200
    assert (await api.get(f"{BASE}/{bank_id}/documents/{document_id}")).status_code == 404
