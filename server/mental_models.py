"""A mental model's Temporal side: its cron schedule, and starting or joining its refresh.

Schedules are created, updated and deleted by the server with the model (inside the same
database transaction, so a schedule Temporal refuses leaves the model unchanged).
"""

from __future__ import annotations

import uuid

from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
)

from activities.mental_models import OPERATION_KIND, refresh_request_hash
from activities.schedules import drop_schedule, put_schedule
from engine.mental_models.payloads import RefreshAsk, RefreshReason, RefreshRequest, TriggerRequest
from engine.mental_models.store import MentalModel
from engine.mental_models.trigger import crons_of, schedule_id_for
from engine.store.operations import register_operation
from server.services import Services
from workflows.mental_models import (
    MentalModelRefreshWorkflow,
    MentalModelTriggerWorkflow,
    refresh_workflow_id,
)


def model_schedule(model: MentalModel, crons: list[str], task_queue: str) -> Schedule:
    """On each cron time, ask for a refresh; a trigger still running makes the next skip."""
    return Schedule(
        action=ScheduleActionStartWorkflow(
            MentalModelTriggerWorkflow.run,
            TriggerRequest(model.bank_id, model.id, "schedule"),
            id=f"mental-model-trigger:{model.bank_id}:{model.id}",
            task_queue=task_queue,
        ),
        spec=ScheduleSpec(cron_expressions=crons),
        policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.SKIP),
    )


async def sync_schedule(client: Client, model: MentalModel, task_queue: str) -> str | None:
    """Make the model's schedule match its trigger; returns the schedule id (None: none)."""
    crons = crons_of(model.trigger)
    if not crons:
        if model.schedule_id is not None:
            await drop_schedule(client, model.schedule_id)
        return None
    schedule_id = schedule_id_for(model.bank_id, model.id, model.kind)
    schedule = model_schedule(model, crons, task_queue)
    await put_schedule(client, schedule_id, schedule, "trigger.refresh_cron")
    return schedule_id


async def submit_refresh(
    services: Services, bank_id: str, model_id: str, reason: RefreshReason, force: bool
) -> str:
    """Register a refresh operation and start the model's refresh, or join the running one
    (signal-with-start); returns the operation id."""
    operation_id = str(uuid.uuid4())
    workflow_id = refresh_workflow_id(bank_id, model_id)
    async with services.pool.acquire() as conn:
        await register_operation(
            conn,
            operation_id,
            bank_id,
            OPERATION_KIND,
            workflow_id,
            refresh_request_hash(bank_id, model_id),
        )
    await services.temporal.start_workflow(
        MentalModelRefreshWorkflow.run,
        RefreshRequest(bank_id, model_id),
        id=workflow_id,
        task_queue=services.settings.task_queue,
        start_signal="request",
        start_signal_args=[RefreshAsk(reason, operation_id, force)],
    )
    return operation_id
