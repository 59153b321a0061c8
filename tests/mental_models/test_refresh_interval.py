"""`min_refresh_interval_seconds` is a workflow timer: an automatic refresh asked too soon
waits it out and then runs; one asked through the API runs at once, and ends such a wait.
Under the time-skipping test server the test moves time itself, so the hour passes at once
(that server has no Schedules: the cron path is tested on the dev server, test_schedules.py)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from support.payload_key import TEST_CONVERTER
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from activities.mental_models import MentalModelActivities
from engine.db import Pool
from engine.embedding import Embedder
from engine.mental_models.payloads import RefreshAsk, RefreshOutcome, RefreshRequest
from engine.mental_models.store import NewModel, clear_model, create_model, list_versions
from engine.mental_models.trigger import merge_trigger
from engine.store.banks import ensure_bank
from mental_models.reflect_stub import StubReflectActivities, StubReflectWorkflow
from workflows.mental_models import MentalModelRefreshWorkflow, refresh_workflow_id

INTERVAL = timedelta(hours=1)


@pytest.fixture
async def skipping_env() -> AsyncIterator[WorkflowEnvironment]:
    env = await WorkflowEnvironment.start_time_skipping(
        data_converter=TEST_CONVERTER,
        test_server_existing_path=str(Path(sys.executable).parent / "temporal-test-server"),
    )
    yield env
    await env.shutdown()


async def timers(handle: WorkflowHandle[Any, Any]) -> list[timedelta]:
    history = await handle.fetch_history()
    return [
        event.timer_started_event_attributes.start_to_fire_timeout.ToTimedelta()
        for event in history.events
        if event.event_type == EventType.EVENT_TYPE_TIMER_STARTED
    ]


async def start(
    env: WorkflowEnvironment, bank_id: str, task_queue: str, ask: RefreshAsk
) -> WorkflowHandle[MentalModelRefreshWorkflow, RefreshOutcome]:
    return await env.client.start_workflow(
        MentalModelRefreshWorkflow.run,
        RefreshRequest(bank_id, "m", [ask]),
        id=refresh_workflow_id(bank_id, "m"),
        task_queue=task_queue,
    )


async def test_an_automatic_refresh_waits_out_the_min_interval(
    skipping_env: WorkflowEnvironment,
    pool: Pool,
    embedder: Embedder,
    cpu: ThreadPoolExecutor,
    bank_id: str,
    task_queue: str,
) -> None:
    async with pool.acquire() as conn:
        await ensure_bank(conn, bank_id)
        trigger = {"min_refresh_interval_seconds": int(INTERVAL.total_seconds())}
        await create_model(
            conn, NewModel(bank_id, "m", "M", "What is known?", merge_trigger({}, trigger))
        )
    activities = MentalModelActivities(pool, embedder, cpu)
    worker = Worker(
        skipping_env.client,
        task_queue=task_queue,
        workflows=[MentalModelRefreshWorkflow, StubReflectWorkflow],
        activities=[
            activities.begin_refresh,
            activities.plan_refresh,
            activities.store_refresh,
            activities.record_refresh_failure,
            activities.finish_refresh,
            StubReflectActivities(pool).stub_reflect_facts,
        ],
    )
    # Time moves only when the test says so: the server's automatic skipping also jumps
    # over the gaps while a child workflow starts, which would hide the interval.
    with skipping_env.auto_time_skipping_disabled():
        async with worker:
            first = await start(skipping_env, bank_id, task_queue, RefreshAsk("api"))
            assert (await first.result()).version == 1
            async with pool.acquire() as conn:
                await clear_model(conn, bank_id, "m")

            scheduled = await start(skipping_env, bank_id, task_queue, RefreshAsk("schedule"))
            waits = await timers(scheduled)
            while not waits:
                await asyncio.sleep(0.1)
                waits = await timers(scheduled)
            [wait] = waits
            assert INTERVAL - timedelta(minutes=1) < wait <= INTERVAL
            async with pool.acquire() as conn:
                assert len(await list_versions(conn, bank_id, "m")) == 1  # still waiting
            await skipping_env.sleep(INTERVAL)
            outcome = await scheduled.result()
            assert outcome.status == "refreshed" and outcome.version == 2

            async with pool.acquire() as conn:
                await clear_model(conn, bank_id, "m")
            manual = await start(skipping_env, bank_id, task_queue, RefreshAsk("api"))
            assert (await manual.result()).version == 3  # the API does not wait
            assert await timers(manual) == []

            # A manual ask while an automatic refresh waits ends the wait; both share it.
            async with pool.acquire() as conn:
                await clear_model(conn, bank_id, "m")
            waiting = await start(skipping_env, bank_id, task_queue, RefreshAsk("consolidation"))
            pending = await timers(waiting)
            while not pending:
                await asyncio.sleep(0.1)
                pending = await timers(waiting)
            await waiting.signal(MentalModelRefreshWorkflow.request, RefreshAsk("api"))
            joined = await waiting.result()
            assert joined.status == "refreshed" and joined.version == 4
