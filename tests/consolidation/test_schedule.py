"""The safety net: a Temporal Schedule, put in place by the worker at start, sweeps the banks
with facts waiting and consolidates them."""

from __future__ import annotations

import signal
from datetime import timedelta
from typing import Any

import httpx
from consolidation_support import configure, observations, retain, status
from support.waiting import until
from support.workers import worker_process
from temporalio.client import (
    ScheduleActionStartWorkflow,
    ScheduleDescription,
    ScheduleOverlapPolicy,
)
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from engine.settings import Settings
from worker.schedules import ensure_schedules
from workflows.consolidation import SWEEP_INTERVAL, sweep_schedule_id


async def test_the_sweep_schedule_consolidates_banks_with_a_backlog(
    api: httpx.AsyncClient, temporal_env: WorkflowEnvironment, settings: Settings, bank_id: str
) -> None:
    await configure(api, bank_id, enable_observations=False)
    items = [
        {"content": f"Rita: {text}", "timestamp": f"2024-04-0{day}T10:00:00Z"}
        for day, text in ((1, "I love sailing."), (2, "I love sailing on lakes."))
    ]
    await retain(api, bank_id, items)
    await configure(api, bank_id, enable_observations=True)  # nothing starts by itself
    assert (await status(api, bank_id))["pending_facts"] == 2

    client = temporal_env.client
    ids = await ensure_schedules(client, settings.task_queue)
    assert await ensure_schedules(client, settings.task_queue) == ids  # idempotent
    handle = client.get_schedule_handle(sweep_schedule_id(settings.task_queue))
    try:
        described = await handle.describe()
        action = described.schedule.action
        assert isinstance(action, ScheduleActionStartWorkflow)
        assert action.workflow == "ConsolidationSweepWorkflow"
        assert action.task_queue == settings.task_queue
        assert [i.every for i in described.schedule.spec.intervals] == [SWEEP_INTERVAL]
        assert described.schedule.policy.overlap == ScheduleOverlapPolicy.SKIP

        await handle.trigger()

        async def backlog_and_observations() -> tuple[int, list[dict[str, Any]]]:
            return (await status(api, bank_id))["pending_facts"], await observations(api, bank_id)

        _, [observation] = await until(
            backlog_and_observations,
            lambda seen: seen[0] == 0 and seen[1],
            "the sweep's consolidation: no fact waiting, an observation",
        )
        assert observation["proof_count"] == 2
        assert (await status(api, bank_id))["operation_status"] in ("running", "completed")
    finally:
        await handle.delete()


async def test_the_worker_creates_the_schedule_at_start(
    temporal_env: WorkflowEnvironment, settings: Settings
) -> None:
    client = temporal_env.client
    handle = client.get_schedule_handle(sweep_schedule_id(settings.task_queue))
    with worker_process(settings, temporal_env) as process:
        try:

            async def described_schedule() -> ScheduleDescription | None:
                try:
                    return await handle.describe()
                except RPCError:
                    assert process.poll() is None, "the worker exited"
                    return None

            described = await until(
                described_schedule, lambda d: d is not None, "the schedule the worker creates"
            )
            assert described is not None
            assert described.schedule.spec.intervals[0].every == timedelta(minutes=10)
        finally:
            process.send_signal(signal.SIGTERM)  # may still be starting up: not its exit code
            process.wait(timeout=30)
            await handle.delete()
