"""A refresh runs reflect (a stub here) on the source query, stores a version with what it
is based on, is skipped when nothing relevant changed, and runs when evidence changed or was
deleted, or after a consolidation that changed observations."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from support.operations import finished_operation

from mental_models.mental_models_support import (
    create_model,
    get_model,
    history,
    refresh,
    retain,
)

# Raw facts only: observations written by the consolidation each retain starts must not
# make these tests depend on when it finishes.
FACTS_ONLY = {"fact_types": ["world", "experience"]}


async def fact_ids(api: httpx.AsyncClient, bank_id: str, document_id: str) -> set[str]:
    response = await api.get(
        f"/v1/default/banks/{bank_id}/memories/list", params={"document_id": document_id}
    )
    return {m["id"] for m in response.json()["items"]}


async def test_a_refresh_stores_a_version_based_on_the_evidence(
    api: httpx.AsyncClient, bank_id: str
) -> None:
    await retain(api, bank_id, "stack", "The team uses Postgres for every service.")
    created = await create_model(
        api, bank_id, id="stack", name="Stack", source_query="What database?", trigger=FACTS_ONLY
    )
    operation = await finished_operation(api, bank_id, created["operation_id"])
    assert operation["result_metadata"]["status"] == "refreshed"

    model = await get_model(api, bank_id, "stack")
    expected = await fact_ids(api, bank_id, "stack")
    assert expected and {e["id"] for e in model["based_on"]} == expected
    assert "Postgres" in model["content"]
    # The model never answers from itself.
    assert "[excluded: stack]" in model["content"]
    assert model["last_refreshed_at"] is not None and model["version"] == 1
    versions = await history(api, bank_id, "stack")
    assert [v["version"] for v in versions] == [1]
    assert versions[0]["content"] == model["content"] and versions[0]["previous_content"] is None
    assert versions[0]["reason"] == "first refresh"


async def test_a_refresh_with_nothing_changed_is_skipped(
    api: httpx.AsyncClient, bank_id: str
) -> None:
    await retain(api, bank_id, "stack", "The team uses Postgres for every service.")
    created = await create_model(
        api, bank_id, id="stack", name="Stack", source_query="What database?", trigger=FACTS_ONLY
    )
    await finished_operation(api, bank_id, created["operation_id"])

    again = await refresh(api, bank_id, "stack")
    assert again["status"] == "completed"
    assert again["result_metadata"]["status"] == "skipped"
    assert again["result_metadata"]["reason"] == "nothing relevant changed"
    assert (await get_model(api, bank_id, "stack"))["version"] == 1

    forced = await refresh(api, bank_id, "stack", {"mode": "full"})
    assert forced["result_metadata"]["status"] == "refreshed"
    assert [v["version"] for v in await history(api, bank_id, "stack")] == [2, 1]


async def test_a_new_relevant_fact_makes_the_next_refresh_run(
    api: httpx.AsyncClient, bank_id: str
) -> None:
    await retain(api, bank_id, "stack", "The team uses Postgres for every service.")
    created = await create_model(
        api, bank_id, id="stack", name="Stack", source_query="What database?", trigger=FACTS_ONLY
    )
    await finished_operation(api, bank_id, created["operation_id"])
    await retain(api, bank_id, "cache", "The team added Redis as a cache in front of Postgres.")

    done = await refresh(api, bank_id, "stack")
    assert done["result_metadata"] | {"version": 2} == {
        "status": "refreshed",
        "version": 2,
        "reason": "evidence changed",
        "asked_by": ["api"],
    }
    model = await get_model(api, bank_id, "stack")
    assert "Redis" in model["content"]
    versions = await history(api, bank_id, "stack")
    assert versions[0]["previous_content"] == versions[1]["content"]


async def test_deleting_an_evidence_fact_makes_the_next_refresh_run(
    api: httpx.AsyncClient, bank_id: str
) -> None:
    await retain(api, bank_id, "stack", "The team uses Postgres for every service.")
    await retain(api, bank_id, "old", "The team used MySQL in 2019.")
    created = await create_model(
        api, bank_id, id="stack", name="Stack", source_query="What database?", trigger=FACTS_ONLY
    )
    await finished_operation(api, bank_id, created["operation_id"])
    deleted = await fact_ids(api, bank_id, "old")
    before = await get_model(api, bank_id, "stack")
    assert deleted <= {e["id"] for e in before["based_on"]}

    response = await api.delete(f"/v1/default/banks/{bank_id}/documents/old")
    assert response.status_code == 200, response.text
    done = await refresh(api, bank_id, "stack")
    assert done["result_metadata"]["status"] == "refreshed"
    assert "deleted" in done["result_metadata"]["reason"]
    after = await get_model(api, bank_id, "stack")
    assert not deleted & {e["id"] for e in after["based_on"]}
    assert "MySQL" not in after["content"] and after["version"] == 2


async def test_a_cleared_model_is_refreshed_in_full(api: httpx.AsyncClient, bank_id: str) -> None:
    await retain(api, bank_id, "stack", "The team uses Postgres for every service.")
    created = await create_model(
        api, bank_id, id="stack", name="Stack", source_query="What database?", trigger=FACTS_ONLY
    )
    await finished_operation(api, bank_id, created["operation_id"])
    cleared = await api.post(f"/v1/default/banks/{bank_id}/mental-models/stack/clear")
    assert cleared.status_code == 200 and cleared.json()["content"] == ""

    done = await refresh(api, bank_id, "stack")
    assert done["result_metadata"]["reason"] == "content was cleared"
    assert "Postgres" in (await get_model(api, bank_id, "stack"))["content"]


async def test_a_consolidation_that_changed_something_refreshes_models_that_ask(
    api: httpx.AsyncClient, bank_id: str
) -> None:
    watching = await create_model(
        api,
        bank_id,
        id="watching",
        name="Watching",
        source_query="How does Alice feel about async Python?",
        trigger={"refresh_after_consolidation": True},
    )
    manual = await create_model(
        api, bank_id, id="manual", name="Manual", source_query="What database?"
    )
    await finished_operation(api, bank_id, watching["operation_id"])
    await finished_operation(api, bank_id, manual["operation_id"])
    # The second fact about Alice makes consolidation write an observation.
    await retain(api, bank_id, "week-1", "Alice: I struggle with async Python.")
    await retain(api, bank_id, "week-3", "Alice: I wrote async database calls today.")
    asked_by_consolidation: list[dict[str, Any]] = []
    while not asked_by_consolidation:  # the retain's consolidation is asynchronous
        await asyncio.sleep(0.2)
        listed = await api.get(f"/v1/default/banks/{bank_id}/operations", params={"limit": 100})
        asked_by_consolidation = [
            op
            for op in listed.json()["operations"]
            if op["task_type"] == "refresh_mental_model"
            and op["status"] == "completed"
            and "consolidation" in (op["result_metadata"] or {}).get("asked_by", [])
        ]
    # Only the model whose trigger asks for it: "manual" has its creation refresh only.
    assert len(asked_by_consolidation) == 1
    assert asked_by_consolidation[0]["result_metadata"]["status"] == "refreshed"
    assert (await get_model(api, bank_id, "manual"))["version"] == 1


async def test_a_failed_refresh_is_reported_on_the_operation_and_the_model(
    api: httpx.AsyncClient, bank_id: str
) -> None:
    created = await create_model(
        api, bank_id, id="broken", name="Broken", source_query="What now? [fail]"
    )
    operation = await finished_operation(api, bank_id, created["operation_id"])
    assert operation["status"] == "failed"
    assert "the model is down" in operation["error_message"]
    model = await get_model(api, bank_id, "broken")
    assert model["last_refresh_failed_at"] is not None
    assert "the model is down" in model["last_refresh_error"]
    assert model["version"] == 0 and model["content"] == ""
