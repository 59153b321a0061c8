"""Temporal Schedules kept in place by the server, the worker and activities: created, or
brought up to date when one with the id exists, and deleted whether or not one exists."""

from __future__ import annotations

from temporalio.client import (
    Client,
    Schedule,
    ScheduleAlreadyRunningError,
    ScheduleUpdate,
    ScheduleUpdateInput,
)
from temporalio.service import RPCError, RPCStatusCode

from engine.errors import InvalidInput


async def put_schedule(
    client: Client, schedule_id: str, schedule: Schedule, field: str | None = None
) -> None:
    """Create the schedule, or replace the definition of the one with this id (callers
    racing on one id all succeed). `field`: the request field whose cron Temporal refused,
    reported as a 400 naming it; None lets the error through."""
    try:
        try:
            await client.create_schedule(schedule_id, schedule)
        except ScheduleAlreadyRunningError:

            def update(_: ScheduleUpdateInput) -> ScheduleUpdate:
                return ScheduleUpdate(schedule=schedule)

            await client.get_schedule_handle(schedule_id).update(update)
    except RPCError as exc:
        if field is not None and exc.status == RPCStatusCode.INVALID_ARGUMENT:
            raise InvalidInput(field, f"Temporal refused it: {exc}") from exc
        raise


async def drop_schedule(client: Client, schedule_id: str) -> None:
    """Delete the schedule; one already gone is not an error."""
    try:
        await client.get_schedule_handle(schedule_id).delete()
    except RPCError as exc:
        if exc.status != RPCStatusCode.NOT_FOUND:
            raise
