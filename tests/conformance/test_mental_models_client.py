"""hindsight-client's mental-model calls work against Engram unchanged: create (with a
trigger patch and a cron), list, get, update, refresh, clear, history and delete."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from hindsight_client import Hindsight
from hindsight_client_api.exceptions import NotFoundException
from starlette.applications import Starlette
from support.serve import serve
from support.waiting import until
from temporalio.worker import Worker


@pytest.fixture
async def client(app: Starlette, worker: Worker) -> AsyncIterator[Hindsight]:
    async with serve(app) as url:
        hindsight = Hindsight(base_url=url, user_agent="engram-tests/1")
        try:
            yield hindsight
        finally:
            await hindsight.aclose()  # type: ignore[no-untyped-call]


async def finished(client: Hindsight, bank_id: str, operation_id: str) -> str:
    status = await until(
        lambda: client.operations.get_operation_status(bank_id, operation_id),
        lambda status: status.status in ("completed", "failed", "cancelled"),
        f"operation {operation_id} finished",
    )
    return str(status.status)


async def test_mental_model_calls_round_trip(client: Hindsight, bank_id: str) -> None:
    await client.aretain(bank_id, "The team prefers Postgres over a separate vector store.")
    created = await client.acreate_mental_model(
        bank_id,
        name="Team stack",
        source_query="Which database does the team prefer?",
        tags=["eng"],
        max_tokens=1024,
        trigger={"refresh_after_consolidation": True, "refresh_cron": "0 2 * * *"},
        id="team-stack",
    )
    assert created.mental_model_id == "team-stack"
    assert await finished(client, bank_id, created.operation_id) == "completed"

    model = await client.aget_mental_model(bank_id, "team-stack")
    assert model.name == "Team stack" and model.tags == ["eng"] and model.max_tokens == 1024
    assert model.trigger is not None and model.trigger.refresh_after_consolidation is True
    assert model.trigger.refresh_cron == "0 2 * * *" and model.trigger.mode == "full"
    assert model.content and model.last_refreshed_at is not None
    assert model.reflect_response is not None

    listed = await client.alist_mental_models(bank_id, tags=["eng"], detail="content")
    assert listed.total == 1 and [m.id for m in listed.items] == ["team-stack"]
    assert listed.items[0].content == model.content
    brief = await client.alist_mental_models(bank_id)
    assert brief.items[0].content is None  # detail defaults to metadata

    updated = await client.aupdate_mental_model(
        bank_id, "team-stack", name="Stack", trigger={"min_refresh_interval_seconds": 60}
    )
    assert updated.name == "Stack" and updated.source_query == model.source_query
    assert updated.trigger is not None
    assert updated.trigger.min_refresh_interval_seconds == 60
    assert updated.trigger.refresh_cron == "0 2 * * *"  # the trigger is a patch

    refreshed = await client.arefresh_mental_model(bank_id, "team-stack", mode="full")
    assert refreshed.operation_id
    assert await finished(client, bank_id, refreshed.operation_id) == "completed"
    again = await client.arefresh_mental_model(bank_id, "team-stack")
    assert await finished(client, bank_id, again.operation_id) == "completed"

    versions = await client.aget_mental_model_history(bank_id, "team-stack")
    assert isinstance(versions, list) and len(versions) == 2  # the unforced one was skipped
    assert {"previous_content", "changed_at"} <= set(versions[0])

    cleared = await client.aclear_mental_model(bank_id, "team-stack")
    assert cleared.content == ""

    await client.adelete_mental_model(bank_id, "team-stack")
    with pytest.raises(NotFoundException):
        await client.aget_mental_model(bank_id, "team-stack")
