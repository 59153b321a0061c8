"""Temporal Schedules the worker keeps in place: created at start, updated when they differ."""

from __future__ import annotations

from datetime import timedelta

from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
)

from activities.schedules import put_schedule
from engine.consolidation.payloads import SweepRequest
from workflows.consolidation import (
    SWEEP_INTERVAL,
    ConsolidationSweepWorkflow,
    sweep_schedule_id,
)


def consolidation_sweep(task_queue: str, every: timedelta = SWEEP_INTERVAL) -> Schedule:
    """Every `every`, consolidate the banks with facts waiting; a sweep still running when
    the next one is due makes that one skip."""
    return Schedule(
        action=ScheduleActionStartWorkflow(
            ConsolidationSweepWorkflow.run,
            SweepRequest(),
            id=sweep_schedule_id(task_queue),
            task_queue=task_queue,
        ),
        spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=every)]),
        policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.SKIP),
    )


async def ensure_schedules(client: Client, task_queue: str) -> list[str]:
    """Create the schedules of this task queue, or bring existing ones up to date (several
    workers starting at once all succeed). Returns their ids."""
    schedule_id = sweep_schedule_id(task_queue)
    schedule = consolidation_sweep(task_queue)
    await put_schedule(client, schedule_id, schedule)
    return [schedule_id]
