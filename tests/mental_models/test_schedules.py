"""A model's cron is a Temporal Schedule created, updated and deleted with the model; a
nightly report is a model with questions and a cron, and every run is kept as a version.

The time-skipping test server does not implement Schedules (CreateSchedule is
"unimplemented"), so these run on the dev server and fire a schedule with `trigger()`.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from support.operations import finished_operation
from temporalio.client import (
    ScheduleActionStartWorkflow,
    ScheduleDescription,
    ScheduleOverlapPolicy,
)
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from engine.settings import Settings
from mental_models.mental_models_support import (
    create_model,
    get_model,
    history,
    retain,
)
from workflows.mental_models import MentalModelTriggerWorkflow


def fire_times(described: ScheduleDescription) -> set[tuple[int, int]]:
    """(hour, minute) of the schedule's next actions, in UTC."""
    assert described.info.next_action_times
    return {(t.hour, t.minute) for t in described.info.next_action_times}


async def test_the_schedule_follows_the_model(
    api: httpx.AsyncClient, temporal_env: WorkflowEnvironment, settings: Settings, bank_id: str
) -> None:
    url = f"/v1/default/banks/{bank_id}/mental-models/digest"
    await create_model(
        api,
        bank_id,
        id="digest",
        name="Digest",
        source_query="What happened?",
        trigger={"refresh_cron": "0 2 * * *"},
    )
    model = await get_model(api, bank_id, "digest")
    schedule_id = model["schedule_id"]
    assert schedule_id == f"engram-mental-model-{bank_id}-digest"
    handle = temporal_env.client.get_schedule_handle(schedule_id)
    described = await handle.describe()
    assert fire_times(described) == {(2, 0)}
    action = described.schedule.action
    assert isinstance(action, ScheduleActionStartWorkflow)
    assert action.workflow == MentalModelTriggerWorkflow.__name__
    assert action.task_queue == settings.task_queue
    assert described.schedule.policy.overlap == ScheduleOverlapPolicy.SKIP

    patched = await api.patch(url, json={"trigger": {"refresh_cron": "30 3 * * 1-5"}})
    assert patched.status_code == 200, patched.text
    described = await handle.describe()
    assert fire_times(described) == {(3, 30)}
    assert {t.weekday() for t in described.info.next_action_times} <= {0, 1, 2, 3, 4}

    patched = await api.patch(url, json={"trigger": {"refresh_cron": None}})
    assert patched.status_code == 200 and patched.json()["schedule_id"] is None
    with pytest.raises(RPCError):
        await handle.describe()

    patched = await api.patch(url, json={"trigger": {"refresh_cron": "@daily"}})
    assert patched.json()["schedule_id"] == schedule_id
    assert fire_times(await handle.describe()) == {(0, 0)}
    assert (await api.delete(url)).status_code == 200
    with pytest.raises(RPCError):
        await handle.describe()


async def test_a_nightly_report_answers_its_questions_on_every_run(
    api: httpx.AsyncClient, temporal_env: WorkflowEnvironment, bank_id: str
) -> None:
    await retain(api, bank_id, "stack", "The team uses Postgres for every service.")
    created = await create_model(
        api,
        bank_id,
        id="nightly",
        name="Nightly report",
        kind="report",
        questions=["What changed today?", "What is at risk?"],
        trigger={"refresh_cron": "0 2 * * *"},
    )
    await finished_operation(api, bank_id, created["operation_id"])
    report = await get_model(api, bank_id, "nightly")
    assert report["kind"] == "report"
    assert report["questions"] == ["What changed today?", "What is at risk?"]
    assert report["source_query"] == "What changed today?\nWhat is at risk?"
    assert report["content"].startswith("## What changed today?\n\nWhat changed today? ->")
    assert "## What is at risk?\n\nWhat is at risk? -> " in report["content"]
    assert report["schedule_id"] == f"engram-report-{bank_id}-nightly"

    # Fire the schedule now, as 02:00 would: nothing changed, and the run is still kept.
    await temporal_env.client.get_schedule_handle(report["schedule_id"]).trigger()
    versions = await history(api, bank_id, "nightly")
    while len(versions) < 2:
        await asyncio.sleep(0.2)
        versions = await history(api, bank_id, "nightly")
    assert [v["version"] for v in versions] == [2, 1]
    assert versions[0]["reason"] == "report run"
    assert versions[0]["content"] == versions[1]["content"]

    reports = await api.get(f"/v1/default/banks/{bank_id}/mental-models", params={"kind": "report"})
    assert [m["id"] for m in reports.json()["items"]] == ["nightly"]
    assert (
        await api.delete(f"/v1/default/banks/{bank_id}/mental-models/nightly")
    ).status_code == 200


async def test_a_scheduled_model_refresh_is_skipped_when_nothing_changed(
    api: httpx.AsyncClient, temporal_env: WorkflowEnvironment, bank_id: str
) -> None:
    await retain(api, bank_id, "stack", "The team uses Postgres for every service.")
    created = await create_model(
        api,
        bank_id,
        id="stack",
        name="Stack",
        source_query="What database?",
        trigger={"refresh_cron": "0 2 * * *", "fact_types": ["world", "experience"]},
    )
    await finished_operation(api, bank_id, created["operation_id"])
    model = await get_model(api, bank_id, "stack")
    await temporal_env.client.get_schedule_handle(model["schedule_id"]).trigger()
    scheduled: list[dict[str, Any]] = []
    while not scheduled:
        await asyncio.sleep(0.2)
        listed = await api.get(f"/v1/default/banks/{bank_id}/operations")
        scheduled = [
            op
            for op in listed.json()["operations"]
            if op["status"] == "completed"
            and "schedule" in (op["result_metadata"] or {}).get("asked_by", [])
        ]
    assert scheduled[0]["result_metadata"]["status"] == "skipped"
    assert (await get_model(api, bank_id, "stack"))["version"] == 1
    await api.delete(f"/v1/default/banks/{bank_id}/mental-models/stack")


async def test_deleting_a_bank_deletes_its_schedules(
    api: httpx.AsyncClient, temporal_env: WorkflowEnvironment, bank_id: str
) -> None:
    await create_model(
        api, bank_id, id="m", name="M", source_query="Q", trigger={"refresh_cron": "@hourly"}
    )
    schedule_id = (await get_model(api, bank_id, "m"))["schedule_id"]
    handle = temporal_env.client.get_schedule_handle(schedule_id)
    await handle.describe()
    assert (await api.delete(f"/v1/default/banks/{bank_id}")).status_code == 200
    with pytest.raises(RPCError):
        await handle.describe()
