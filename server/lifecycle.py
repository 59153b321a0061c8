"""A bank's lifecycle schedule on the Temporal side: created with the bank's first write,
updated when its cron changes, deleted with the bank (docs/lifecycle.md); and what an
erasure leaves for the workers: observations to rebuild, mental models to refresh."""

from __future__ import annotations

from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
)

from activities.schedules import drop_schedule, put_schedule
from engine.consolidation.payloads import ConsolidationRequest
from engine.lifecycle.erasure import ForgetResult
from engine.lifecycle.payloads import LifecycleRequest
from engine.lifecycle.schedule import lifecycle_schedule_id, record_schedule, scheduled_cron
from engine.store.banks import Bank
from server.mental_models import submit_refresh
from server.services import Services
from workflows.consolidation import ConsolidationWorkflow, consolidation_workflow_id
from workflows.lifecycle import LifecycleWorkflow, lifecycle_workflow_id


def lifecycle_schedule(bank_id: str, cron: str, task_queue: str) -> Schedule:
    return Schedule(
        action=ScheduleActionStartWorkflow(
            LifecycleWorkflow.run,
            LifecycleRequest(bank_id),
            id=lifecycle_workflow_id(bank_id),
            task_queue=task_queue,
        ),
        spec=ScheduleSpec(cron_expressions=[cron]),
        policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.SKIP),
    )


async def ensure_lifecycle_schedule(services: Services, bank: Bank) -> None:
    """Create or update the bank's schedule when its cron is not the recorded one (one
    indexed read when nothing changed)."""
    cron = bank.config.lifecycle_policy.schedule_cron
    async with services.pool.acquire() as conn:
        if await scheduled_cron(conn, bank.bank_id) == cron:
            return
    schedule_id = lifecycle_schedule_id(bank.bank_id)
    schedule = lifecycle_schedule(bank.bank_id, cron, services.settings.task_queue)
    await put_schedule(services.temporal, schedule_id, schedule, "lifecycle.schedule_cron")
    async with services.pool.acquire() as conn:
        await record_schedule(conn, bank.bank_id, cron)


async def delete_lifecycle_schedule(client: Client, bank_id: str) -> None:
    await drop_schedule(client, lifecycle_schedule_id(bank_id))


async def after_erasure(services: Services, bank: Bank, result: ForgetResult) -> None:
    """The erasure retracted observations (their other evidence now waits for consolidation)
    and emptied mental models that cited a forgotten fact: start the bank's consolidation (or
    tell the running one to make another pass) and refresh those models, so both are rebuilt
    from what is left. Both run on their own; the erasure itself is already committed."""
    if result.dry_run:
        return
    if result.observations_retracted and bank.config.enable_observations:
        await services.temporal.start_workflow(
            ConsolidationWorkflow.run,
            ConsolidationRequest(bank.bank_id, "forget"),
            id=consolidation_workflow_id(bank.bank_id),
            task_queue=services.settings.task_queue,
            start_signal="more",
        )
    for model_id in result.mental_models_affected:
        await submit_refresh(services, bank.bank_id, model_id, "lifecycle", force=True)
