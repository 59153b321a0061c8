"""The local consolidation path end to end: retain → RetainWorkflow → ConsolidationWorkflow →
observations, read back through the API."""

from __future__ import annotations

from typing import Any

import httpx
from consolidation_support import (
    BASE,
    configure,
    memory,
    observations,
    retain,
    status,
    wait_consolidated,
)
from support.openapi import check
from support.waiting import until


def said(speaker: str, text: str, day: str, document_id: str) -> dict[str, str]:
    return {
        "content": f"{speaker}: {text}",
        "timestamp": f"{day}T10:00:00Z",
        "document_id": document_id,
    }


async def test_knowledge_evolution_ends_with_one_updated_observation(
    api: httpx.AsyncClient, bank_id: str
) -> None:
    [week1] = await retain(
        api, bank_id, [said("Alice", "I struggle with async Python.", "2024-01-02", "week-1")]
    )
    await wait_consolidated(api, bank_id)
    assert await observations(api, bank_id) == []  # one fact alone is not yet a belief
    [week3] = await retain(
        api,
        bank_id,
        [said("Alice", "I wrote async database calls today.", "2024-01-16", "week-3")],
    )
    await wait_consolidated(api, bank_id)

    [observation] = await observations(api, bank_id)
    assert observation["text"] == (
        "Alice is growing comfortable with async Python and no longer struggles with it: "
        "Alice wrote async database calls."
    )
    assert observation["proof_count"] == 1
    assert observation["source_memory_ids"] == [week3]
    detail = await memory(api, bank_id, observation["id"])
    [previous] = detail["history"]
    assert previous["previous_text"] == "Alice struggles with async Python."
    assert previous["text"] == observation["text"]
    assert "negation flip" in previous["reason"] and previous["fact_ids"] == [week3]
    stances = {e["memory_id"]: e["stance"] for e in detail["evidence"]}
    assert stances == {week1: "superseded", week3: "supports"}
    assert detail["version"] == 2 and detail["source_memory_ids"] == [week3]

    entities = (await api.get(f"{BASE}/{bank_id}/entities")).json()["items"]
    alice = next(e for e in entities if e["canonical_name"] == "Alice")
    entity = (await api.get(f"{BASE}/{bank_id}/entities/{alice['id']}")).json()
    assert [o["text"] for o in entity["observations"]] == [observation["text"]]

    operations = (await api.get(f"{BASE}/{bank_id}/operations")).json()["operations"]
    runs = [o for o in operations if o["task_type"] == "consolidation"]
    assert len(runs) == 2 and {o["status"] for o in runs} == {"completed"}
    assert runs[0]["result_metadata"]["created"] == 1  # newest first: week 3's run

    recalled = await api.post(
        f"{BASE}/{bank_id}/memories/recall",
        json={"query": "Is Alice comfortable with async Python?", "types": ["observation"]},
    )
    assert recalled.status_code == 200, recalled.text
    assert [r["id"] for r in recalled.json()["results"]] == [observation["id"]]


async def test_repeated_evidence_grows_one_observation(
    api: httpx.AsyncClient, bank_id: str
) -> None:
    texts = [
        "I play tennis every weekend.",
        "I play tennis on weekends.",
        "I play tennis at the weekend.",
    ]
    ids: list[str] = []
    for week, text in enumerate(texts):
        day = f"2024-03-{10 + 7 * week:02d}"
        ids += await retain(api, bank_id, [said("Marco", text, day, f"tennis-{week}")])
        await wait_consolidated(api, bank_id)
    [observation] = await observations(api, bank_id)
    assert observation["proof_count"] == 3
    assert sorted(observation["source_memory_ids"]) == sorted(ids)
    assert "Marco plays tennis" in observation["text"]
    detail = await memory(api, bank_id, observation["id"])
    assert detail["history"] == []  # reinforced, never rewritten
    assert detail["trend"] in ("strengthening", "stable")
    last = await status(api, bank_id)  # the third retain's run: one fact, reinforcing
    assert last["operation_status"] == "completed" and last["pending_facts"] == 0
    assert (last["progress"]["processed"], last["progress"]["reinforced"]) == (1, 1)


async def test_a_changed_preference_updates_the_observation(
    api: httpx.AsyncClient, bank_id: str
) -> None:
    await retain(
        api,
        bank_id,
        [
            said("Noor", "I prefer tea.", "2024-02-01", "tea-1"),
            said("Noor", "I prefer tea in the afternoon.", "2024-02-08", "tea-2"),
        ],
    )
    await wait_consolidated(api, bank_id)
    [before] = await observations(api, bank_id)
    assert before["proof_count"] == 2 and "tea" in before["text"]
    [coffee] = await retain(
        api, bank_id, [said("Noor", "I prefer coffee now.", "2024-04-01", "coffee")]
    )
    await wait_consolidated(api, bank_id)
    [after] = await observations(api, bank_id)
    assert after["id"] == before["id"]
    assert after["text"] == "Noor prefers coffee now, and no longer prefers tea."
    assert after["proof_count"] == 1 and after["source_memory_ids"] == [coffee]
    [previous] = (await memory(api, bank_id, after["id"]))["history"]
    assert previous["previous_text"] == before["text"]
    assert "changed preference" in previous["reason"]
    history = await api.get(f"{BASE}/{bank_id}/memories/{after['id']}/history")
    assert history.json() == (await memory(api, bank_id, after["id"]))["history"]


async def test_different_people_and_scopes_never_share_an_observation(
    api: httpx.AsyncClient, bank_id: str
) -> None:
    await retain(
        api,
        bank_id,
        [
            said("Alice", "I prefer tea.", "2024-02-01", "a1"),
            said("Alice", "I prefer tea.", "2024-02-02", "a2") | {"tags": ["work"]},
            said("Bob", "I prefer tea.", "2024-02-03", "b1"),
            said("Alice", "I prefer green tea.", "2024-02-04", "a3"),
        ],
    )
    await wait_consolidated(api, bank_id)
    [observation] = await observations(api, bank_id)  # only Alice's untagged pair
    assert observation["tags"] == [] and observation["proof_count"] == 2
    assert observation["entities"] == "Alice"


async def test_observations_off_means_no_consolidation_until_turned_on(
    api: httpx.AsyncClient, bank_id: str
) -> None:
    await configure(api, bank_id, enable_observations=False)
    await retain(
        api,
        bank_id,
        [
            said("Ines", "I prefer window seats.", "2024-05-01", "s1"),
            said("Ines", "I prefer window seats on planes.", "2024-05-02", "s2"),
        ],
    )
    waiting = await status(api, bank_id)
    assert waiting["pending_facts"] == 2 and waiting["operation_id"] is None
    refused = await api.post(f"{BASE}/{bank_id}/consolidate")
    assert refused.status_code == 400 and refused.json()["field"] == "enable_observations"

    await configure(api, bank_id, enable_observations=True)
    started = await api.post(f"{BASE}/{bank_id}/consolidate")
    assert started.status_code == 200, started.text
    await wait_consolidated(api, bank_id)
    [observation] = await observations(api, bank_id)
    assert observation["proof_count"] == 2


async def test_clearing_observations_puts_the_facts_back_on_the_backlog(
    api: httpx.AsyncClient, bank_id: str
) -> None:
    await retain(
        api,
        bank_id,
        [
            said("Yuki", "I love climbing.", "2024-06-01", "c1"),
            said("Yuki", "I love climbing outdoors.", "2024-06-02", "c2"),
        ],
    )
    await wait_consolidated(api, bank_id)
    [first] = await observations(api, bank_id)
    cleared = await api.delete(f"{BASE}/{bank_id}/observations")
    assert cleared.status_code == 200, cleared.text
    assert cleared.json()["success"] is True and cleared.json()["deleted_count"] == 1
    assert await observations(api, bank_id) == []
    assert (await status(api, bank_id))["pending_facts"] == 2
    assert (await api.get(f"{BASE}/{bank_id}/memories/{first['id']}")).status_code == 404

    assert (await api.post(f"{BASE}/{bank_id}/consolidate")).status_code == 200
    await wait_consolidated(api, bank_id)
    [rebuilt] = await observations(api, bank_id)
    assert rebuilt["text"] == first["text"] and rebuilt["id"] != first["id"]
    missing = await api.delete(f"{BASE}/no-such-bank-{bank_id}/observations")
    assert missing.status_code == 404


async def test_deleting_the_evidence_retracts_the_observation(
    api: httpx.AsyncClient, bank_id: str
) -> None:
    await retain(
        api,
        bank_id,
        [
            said("Omar", "I live in Lisbon.", "2024-07-01", "l1"),
            said("Omar", "I live in Lisbon with my cat.", "2024-07-02", "l2"),
        ],
    )
    await wait_consolidated(api, bank_id)
    [observation] = await observations(api, bank_id)
    for document_id in ("l1", "l2"):
        deleted = await api.delete(f"{BASE}/{bank_id}/documents/{document_id}")
        assert deleted.status_code == 200, deleted.text
    assert (await api.post(f"{BASE}/{bank_id}/consolidate")).status_code == 200
    # The run that repairs it may start after the last one finished.
    await until(lambda: observations(api, bank_id), lambda left: left == [], "no observation left")
    history = await api.get(f"{BASE}/{bank_id}/memories/{observation['id']}/history")
    [retracted] = history.json()
    assert retracted["change"] == "retracted" and "deleted" in retracted["reason"]


async def test_document_history_shows_consolidations_clears_edits_and_deletes(
    api: httpx.AsyncClient, bank_id: str
) -> None:
    doc = (await api.get("/openapi.json")).json()
    bank = f"{BASE}/{bank_id}"
    fact, other = await retain(
        api,
        bank_id,
        [
            said("Omar", "I live in Lisbon.", "2024-07-01", "l1"),
            said("Omar", "I live in Lisbon with my cat.", "2024-07-02", "l2"),
        ],
    )
    await wait_consolidated(api, bank_id)
    [observation] = await observations(api, bank_id)

    def kinds(history: dict[str, Any]) -> list[str]:
        return [e["kind"] for e in history["items"]]

    history = check(doc, await api.get(f"{bank}/documents/l1/history"))
    assert kinds(history) == ["consolidation", "retain"]
    assert history["items"][0]["observations_created"] == {"count": 1, "ids": [observation["id"]]}
    # Clearing the bank's observations shows on every document whose facts they rested on.
    cleared = await api.delete(f"{bank}/observations")
    assert cleared.status_code == 200 and cleared.json()["deleted_count"] == 1
    for document in ("l1", "l2"):
        latest = check(doc, await api.get(f"{bank}/documents/{document}/history"))["items"][0]
        assert latest["kind"] == "observations_cleared" and latest["operation_id"] is None
        assert latest["observations_removed"] == {"count": 1, "ids": [observation["id"]]}

    memory_url = f"{bank}/memories/{fact}"
    assert (await api.patch(memory_url, json={"text": "Omar lives in Porto."})).status_code == 200
    assert (await api.patch(memory_url, json={"state": "invalidated"})).status_code == 200
    assert (await api.patch(memory_url, json={"state": "valid"})).status_code == 200
    assert (await api.delete(memory_url)).status_code == 200
    history = check(doc, await api.get(f"{bank}/documents/l1/history"))
    assert kinds(history)[:4] == [
        "fact_deleted",
        "fact_restored",
        "fact_invalidated",
        "fact_edited",
    ]
    assert {e["fact_id"] for e in history["items"][:4]} == {fact}
    assert history["items"][0]["facts_removed"] == 1
    assert history["items"][0]["operation_id"] is None

    assert (await api.delete(f"{bank}/documents/l2")).status_code == 200
    gone = check(doc, await api.get(f"{bank}/documents/l2/history"))
    assert kinds(gone)[0] == "fact_deleted" and gone["items"][0]["facts_removed"] == 1
    assert other not in {e["fact_id"] for e in gone["items"]}
