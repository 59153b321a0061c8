"""Issue 14's maintenance routes against the real server and worker: retrying a cancelled
retain, clearing one fact's observations, one audit entry, and the lifecycle routes, each
answer checked against /openapi.json."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import httpx
from support.openapi import check
from support.operations import finished_operation
from support.waiting import until
from support.workers import production_worker
from temporalio.testing import WorkflowEnvironment

from engine.db import Pool
from engine.embedding import Embedder
from engine.retain.documents import sweep_staging
from engine.settings import Settings

BASE = "/v1/default/banks"


async def cancelled_retain(api: httpx.AsyncClient, bank: str, op: str) -> None:
    """An async retain cancelled before any worker ran it."""
    item = {"content": f"Ines repaired the blue boat in Porto ({op}).", "document_id": op}
    body = {"items": [item], "async": True, "operation_id": op}
    assert (await api.post(f"{BASE}/{bank}/memories", json=body)).status_code == 200
    assert (await api.delete(f"{BASE}/{bank}/operations/{op}")).status_code == 200


async def test_a_cancelled_retain_is_retried_with_its_input_until_the_input_is_swept(
    plain_api: httpx.AsyncClient,
    temporal_env: WorkflowEnvironment,
    settings: Settings,
    pool: Pool,
    embedder: Embedder,
    cpu: ThreadPoolExecutor,
    bank_id: str,
) -> None:
    doc = (await plain_api.get("/openapi.json")).json()
    await cancelled_retain(plain_api, bank_id, "first")
    await cancelled_retain(plain_api, bank_id, "second")
    running = await plain_api.post(
        f"{BASE}/{bank_id}/memories",
        json={"items": [{"content": "Tomas sails."}], "async": True, "operation_id": "open"},
    )
    assert running.status_code == 200
    refused = await plain_api.post(f"{BASE}/{bank_id}/operations/open/retry")
    assert refused.status_code == 409 and "only a failed or cancelled" in refused.text
    async with production_worker(temporal_env, settings, pool, embedder, cpu):
        assert (await finished_operation(plain_api, bank_id, "first"))["status"] == "cancelled"
        assert (await finished_operation(plain_api, bank_id, "second"))["status"] == "cancelled"
        retried = check(doc, await plain_api.post(f"{BASE}/{bank_id}/operations/first/retry"))
        assert retried == {
            "success": True,
            "message": "operation first queued for retry",
            "operation_id": "first",
        }
        done = await finished_operation(plain_api, bank_id, "first")
        assert done["status"] == "completed", done
        assert done["result_metadata"]["document_ids"] == ["first"]
        facts = await plain_api.get(
            f"{BASE}/{bank_id}/memories/list", params={"document_id": "first"}
        )
        assert "blue boat" in facts.json()["items"][0]["text"]
        again = await plain_api.post(f"{BASE}/{bank_id}/operations/first/retry")
        assert again.status_code == 409, again.text
        # The second one's input is swept (as after the retry window): a 409 saying so.
        async with pool.acquire() as conn:
            await sweep_staging(conn, timedelta(0), timedelta(0))
        gone = await plain_api.post(f"{BASE}/{bank_id}/operations/second/retry")
        assert gone.status_code == 409 and "send the request again" in gone.json()["detail"]
        assert (await finished_operation(plain_api, bank_id, "second"))["status"] == "cancelled"
    missing = await plain_api.post(f"{BASE}/{bank_id}/operations/nope/retry")
    assert missing.status_code == 404


async def test_clearing_one_facts_observations_keeps_the_fact_and_records_the_retraction(
    api: httpx.AsyncClient, pool: Pool, bank_id: str
) -> None:
    doc = (await api.get("/openapi.json")).json()
    items = [
        {"content": "Ines loves sailing on the Douro river.", "timestamp": "2024-05-01T10:00:00Z"},
        {"content": "Ines loves sailing at dawn.", "timestamp": "2024-05-02T10:00:00Z"},
    ]
    response = await api.post(f"{BASE}/{bank_id}/memories", json={"items": items})
    assert response.status_code == 200, response.text
    row = await until(
        lambda: pool.fetchrow(
            "SELECT e.observation_id::text AS obs, e.fact_id::text AS fact"
            " FROM observation_evidence e WHERE e.bank_id = $1 LIMIT 1",
            bank_id,
        ),
        lambda row: row is not None,
        "an observation made by consolidation",
    )
    assert row is not None
    path = f"{BASE}/{bank_id}/memories/{row['fact']}/observations"
    cleared = check(doc, await api.delete(path))
    assert cleared["deleted_count"] >= 1
    async with pool.acquire() as conn:
        fact = await conn.fetchval(
            "SELECT count(*) FROM memory_units WHERE id = $1::uuid", row["fact"]
        )
        history = await conn.fetchval(
            "SELECT change FROM observation_history WHERE observation_id = $1::uuid"
            " ORDER BY id DESC LIMIT 1",
            row["obs"],
        )
        events = await conn.fetch(
            "SELECT v.observations_removed::text[] AS removed FROM document_versions v"
            " JOIN memory_units f ON f.document_id = v.document_id AND f.bank_id = v.bank_id"
            " WHERE f.id = $1::uuid AND v.kind = 'observations_cleared'",
            row["fact"],
        )
    assert fact == 1 and history == "retracted"
    # ... and in the history of the fact's document
    assert len(events) == 1 and row["obs"] in events[0]["removed"]
    gone = await api.get(f"{BASE}/{bank_id}/memories/{row['obs']}")
    assert gone.status_code == 404
    observation = await api.delete(f"{BASE}/{bank_id}/memories/{row['obs']}/observations")
    assert observation.status_code == 404
    unknown = await api.delete(f"{BASE}/{bank_id}/memories/not-a-uuid/observations")
    assert unknown.status_code == 404
    # Regenerating the entity recounts it and rebuilds its observations before answering.
    async with pool.acquire() as conn:
        entity_id = await conn.fetchval(
            "UPDATE entities SET mention_count = 99 WHERE bank_id = $1"
            " AND canonical_name = 'Ines' RETURNING id::text",
            bank_id,
        )
    regenerated = check(doc, await api.post(f"{BASE}/{bank_id}/entities/{entity_id}/regenerate"))
    assert regenerated["canonical_name"] == "Ines" and regenerated["mention_count"] == 2
    assert regenerated["observations"], regenerated
    async with pool.acquire() as conn:
        waiting = await conn.fetchval(
            "SELECT count(*) FROM consolidation_backlog WHERE bank_id = $1",
            bank_id,
        )
    assert waiting == 0
    missing = await api.post(f"{BASE}/{bank_id}/entities/{row['fact']}/regenerate")
    assert missing.status_code == 404


async def test_lifecycle_routes_and_one_audit_entry_answer_as_documented(
    api: httpx.AsyncClient, bank_id: str
) -> None:
    doc = (await api.get("/openapi.json")).json()
    for route in ("/memories/{memory_id}", "/forget", "/memories/{memory_id}/feedback"):
        for operation in doc["paths"][f"{BASE}/{{bank_id}}{route}"].values():
            assert operation["tags"] == ["lifecycle"] or operation["tags"] == ["memories"]
    body = {"items": [{"content": "Ines moved to Lisbon in March 2024.", "document_id": "d"}]}
    assert (await api.post(f"{BASE}/{bank_id}/memories", json=body)).status_code == 200
    listed = (await api.get(f"{BASE}/{bank_id}/memories/list")).json()["items"]
    memory_id = listed[0]["id"]
    memory = f"{BASE}/{bank_id}/memories/{memory_id}"
    patched = check(doc, await api.patch(memory, json={"text": "Ines moved to Porto in 2024."}))
    assert patched["text"] == "Ines moved to Porto in 2024." and patched["bank_id"] == bank_id
    history = (await api.get(f"{memory}/history")).json()
    assert history[0]["text"] == "Ines moved to Porto in 2024."
    check(doc, await api.get(f"{memory}/history"))
    feedback = check(doc, await api.post(f"{memory}/feedback", json={"signal": "useful"}))
    assert feedback["importance"] >= feedback["importance_before"]
    dry = check(doc, await api.delete(memory, params={"dry_run": "true"}))
    assert dry["dry_run"] is True and dry["deleted_count"] == 1
    forget = check(
        doc, await api.post(f"{BASE}/{bank_id}/forget", json={"document_id": "d", "dry_run": True})
    )
    assert [m["id"] for m in forget["memories"]] == [memory_id]
    audit = (await api.get(f"{BASE}/{bank_id}/audit-logs", params={"limit": 50})).json()
    patch_entry = next(e for e in audit["items"] if e["action"].startswith("PATCH"))
    one = check(doc, await api.get(f"{BASE}/{bank_id}/audit-logs/{patch_entry['id']}"))
    assert one == patch_entry and one["transport"] == "http"
    other = await api.get(f"{BASE}/other-{bank_id}/audit-logs/{patch_entry['id']}")
    assert other.status_code == 404
    assert (await api.get(f"{BASE}/{bank_id}/audit-logs/not-an-id")).status_code == 404


async def test_document_history_lists_each_write_and_reprocess_extracts_with_todays_config(
    api: httpx.AsyncClient, bank_id: str
) -> None:
    doc = (await api.get("/openapi.json")).json()
    bank = f"{BASE}/{bank_id}"
    item = {
        "content": "Ines moved to Lisbon in March 2024. She adopted a cat named Miso.",
        "document_id": "notes",
        "timestamp": "2024-05-01T10:00:00Z",
    }
    assert (await api.put(bank, json={"extraction_mode": "local"})).status_code == 200
    first = (await api.post(f"{bank}/memories", json={"items": [item]})).json()
    assert first["facts_added"] == 2
    appended = {**item, "content": "Miso likes tuna.", "update_mode": "append"}
    assert (await api.post(f"{bank}/memories", json={"items": [appended]})).status_code == 200
    # Today's config: no extraction, each chunk is one fact.
    assert (await api.put(bank, json={"extraction_mode": "none"})).status_code == 200
    queued = check(doc, await api.post(f"{bank}/documents/notes/reprocess"))
    assert queued["success"] and queued["items_count"] == 2  # the retain's and the append's
    done = await finished_operation(api, bank_id, queued["operation_id"])
    assert done["status"] == "completed" and done["task_type"] == "reprocess", done
    facts = (await api.get(f"{bank}/memories/list", params={"document_id": "notes"})).json()
    assert sorted(f["text"] for f in facts["items"]) == [
        "Ines moved to Lisbon in March 2024. She adopted a cat named Miso.",
        "Miso likes tuna.",
    ]
    history = check(doc, await api.get(f"{bank}/documents/notes/history"))
    assert history["total"] == 3
    kinds = [(e["kind"], e["facts_added"], e["facts_removed"]) for e in history["items"]]
    assert kinds[0] == ("reprocess", 2, 3) and kinds[2] == ("retain", 2, 0)
    assert kinds[1][0] == "append"
    assert history["items"][0]["operation_id"] == queued["operation_id"]
    assert history["items"][0]["content_hash"] != history["items"][2]["content_hash"]
    page = (await api.get(f"{bank}/documents/notes/history", params={"limit": 1})).json()
    assert page["total"] == 3 and len(page["items"]) == 1
    assert (await api.get(f"{bank}/documents/nope/history")).status_code == 404
    assert (await api.post(f"{bank}/documents/nope/reprocess")).status_code == 404


async def test_reprocess_keeps_each_items_timestamp(api: httpx.AsyncClient, bank_id: str) -> None:
    bank = f"{BASE}/{bank_id}"
    assert (await api.put(bank, json={"extraction_mode": "none"})).status_code == 200
    items = [
        {"content": "Ines moved to Lisbon.", "document_id": "log", "timestamp": "2021-03-01"},
        {"content": "Ines moved to Porto.", "document_id": "log", "timestamp": "2023-09-15"},
    ]
    assert (await api.post(f"{bank}/memories", json={"items": items})).status_code == 200

    async def stamps() -> dict[str, str]:
        listed = await api.get(f"{bank}/memories/list", params={"document_id": "log"})
        return {f["text"]: f["mentioned_at"][:10] for f in listed.json()["items"]}

    before = await stamps()
    assert before == {"Ines moved to Lisbon.": "2021-03-01", "Ines moved to Porto.": "2023-09-15"}
    queued = (await api.post(f"{bank}/documents/log/reprocess")).json()
    assert queued["items_count"] == 2
    assert (await finished_operation(api, bank_id, queued["operation_id"]))["status"] == "completed"
    assert await stamps() == before
    document = (await api.get(f"{bank}/documents/log")).json()
    assert document["original_text"] == "Ines moved to Lisbon.\n\nInes moved to Porto."
