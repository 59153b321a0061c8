"""ConsolidationWorkflow (one per bank) and ConsolidationSweepWorkflow (the schedule's).

The workflow id `consolidate:{bank}` makes Temporal run one consolidation per bank at a time.
A request that finds one running signals it (`more`) instead of being skipped: the run goes
on until the backlog is empty and then makes one more pass if it was signalled meanwhile, so
a fact stored while a run was finishing is not left for the schedule. (Temporal refuses to
complete a run that received a signal its last task did not see, so no signal is lost.) A run
started by a retain first waits SETTLE_AFTER_RETAIN, so a burst of retains shares one run.

Each pass takes the backlog in bounded batches, one activity each; a batch commits its
observations together with the facts it consolidated, so a crash resumes from the first
fact still waiting. Progress is a query, and the run's row in `operations` (kind
`consolidation`). After BATCHES_PER_RUN batches the run continues as new, carrying its
operation and totals, so its history stays small however large the backlog.

A run that changed observations then asks for a refresh of the bank's mental models whose
trigger has `refresh_after_consolidation` (workflows/mental_models.py).

The sweep, started by a Temporal Schedule every SWEEP_INTERVAL, is the safety net: it
requests a consolidation for every bank with facts waiting (e.g. from an import, or a retain
whose request failed) or with observations whose evidence was deleted.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import (
    ActivityError,
    FailureError,
    WorkflowAlreadyStartedError,
    is_cancelled_exception,
)

with workflow.unsafe.imports_passed_through():
    from activities.consolidation import ConsolidationActivities
    from engine.consolidation.payloads import (
        BatchRequest,
        BatchResult,
        ConsolidationCounts,
        ConsolidationDone,
        ConsolidationRequest,
        ConsolidationStart,
        OperationStatus,
        SweepRequest,
    )
    from workflows import policies

from workflows.mental_models import refresh_after_consolidation
from workflows.webhooks import notify

# One batch: local batches take about a second; llm ones wait on a model, with patient
# retries (rate limits, 5xx) like extraction; from LLM_FALLBACK_ATTEMPT on, a retry takes the
# local path (activities/consolidation.py), so a model that stays down does not stop the run.
CONSOLIDATE = policies.ActivityPolicy(
    timedelta(minutes=10),
    RetryPolicy(
        initial_interval=timedelta(seconds=1),
        backoff_coefficient=2.0,
        maximum_interval=timedelta(minutes=2),
        maximum_attempts=6,
    ),
)
BATCHES_PER_RUN = 200
# Start-or-signal attempts when a run finishes between our start and our signal.
REQUEST_ATTEMPTS = 3
# A consolidation requested by a retain waits this long before it starts, so that a burst of
# retains (a chat client retaining each turn) is consolidated by one run in full batches
# rather than by one run, and with an LLM one model call, per retain.
SETTLE_AFTER_RETAIN = timedelta(seconds=1)
SWEEP_INTERVAL = timedelta(minutes=10)


def consolidation_workflow_id(bank_id: str) -> str:
    return f"consolidate:{bank_id}"


def sweep_schedule_id(task_queue: str) -> str:
    return f"consolidation-sweep:{task_queue}"


async def request_consolidation(
    bank_id: str, reason: str, settle: timedelta = timedelta(0)
) -> bool:
    """From a workflow: start the bank's consolidation, or signal the running one. The child
    is abandoned, so it outlives the caller. False when neither worked (the schedule will
    pick the bank up)."""
    workflow_id = consolidation_workflow_id(bank_id)
    for _ in range(REQUEST_ATTEMPTS):
        try:
            await workflow.start_child_workflow(
                ConsolidationWorkflow.run,
                ConsolidationRequest(bank_id, reason, settle_seconds=settle.total_seconds()),
                id=workflow_id,
                parent_close_policy=workflow.ParentClosePolicy.ABANDON,
            )
            return True
        except WorkflowAlreadyStartedError:
            pass
        try:
            handle = workflow.get_external_workflow_handle_for(
                ConsolidationWorkflow.run, workflow_id
            )
            await handle.signal(ConsolidationWorkflow.more)
            return True
        except FailureError as exc:  # it completed between the start and the signal
            workflow.logger.info("signal to %s failed (%s); starting again", workflow_id, exc)
    workflow.logger.warning("consolidation of %s not requested; the schedule will", bank_id)
    return False


@workflow.defn
class ConsolidationWorkflow:
    def __init__(self) -> None:
        self._more = False
        self._totals = ConsolidationCounts()
        self._backlog = 0
        self._batches = 0

    @workflow.signal
    def more(self) -> None:
        """New facts were stored: make one more pass before finishing."""
        self._more = True

    @workflow.query
    def progress(self) -> dict[str, int]:
        return {
            **self._totals.as_dict(),
            "backlog": self._backlog,
            "batches": self._batches,
        }

    @workflow.run
    async def run(self, request: ConsolidationRequest) -> ConsolidationCounts:
        self._totals = request.totals
        self._batches = request.batches
        operation_id = request.operation_id or f"consolidation-{workflow.uuid4()}"
        if not request.operation_id and request.settle_seconds > 0:
            await workflow.sleep(request.settle_seconds)
        if not request.operation_id:
            await workflow.execute_activity_method(
                ConsolidationActivities.begin_consolidation,
                ConsolidationStart(
                    request.bank_id, operation_id, workflow.info().workflow_id, request.reason
                ),
                start_to_close_timeout=policies.BOOKKEEPING.start_to_close,
                retry_policy=policies.BOOKKEEPING.retry,
                heartbeat_timeout=policies.BOOKKEEPING.heartbeat,
            )
        try:
            await self._drain(request, operation_id)
        except asyncio.CancelledError:
            await self._finish(operation_id, "cancelled", "cancelled")
            raise
        except ActivityError as exc:
            if is_cancelled_exception(exc) and workflow.patched("cancelled-while-failing"):
                # Cancelled while a batch was being retried: the batch reports the cancel as
                # its failure; the operation reads "cancelled" like any other cancel.
                await self._finish(operation_id, "cancelled", "cancelled")
                raise
            await self._finish(operation_id, "failed", _cause(exc))
            if workflow.patched("webhooks-after-consolidation"):
                await notify(
                    request.bank_id,
                    f"consolidation:{operation_id}",
                    "consolidation.failed",
                    {"operation_id": operation_id, "error": _cause(exc)},
                )
            raise
        await self._finish(operation_id, "completed", None)
        if workflow.patched("webhooks-after-consolidation"):
            await notify(
                request.bank_id,
                f"consolidation:{operation_id}",
                "consolidation.completed",
                {"operation_id": operation_id, **self._totals.as_dict()},
            )
        if _changed(self._totals) and workflow.patched("refresh-mental-models"):
            await _refresh_mental_models(request.bank_id)
        if self._more and workflow.patched("consolidation-late-request"):
            # A request signalled while this run was finishing (its operation already marked
            # completed, the mental models refreshing) gets a run and an operation of its own,
            # instead of being dropped with this run.
            workflow.continue_as_new(
                replace(
                    request,
                    operation_id="",
                    totals=ConsolidationCounts(),
                    batches=0,
                    settle_seconds=0,
                )
            )
        return self._totals

    async def _drain(self, request: ConsolidationRequest, operation_id: str) -> None:
        runs_batches = 0
        while True:
            self._more = False
            while True:
                result: BatchResult = await workflow.execute_activity_method(
                    ConsolidationActivities.consolidate_batch,
                    BatchRequest(
                        request.bank_id,
                        operation_id,
                        request.mode,
                        self._totals,
                        request.batch_size,
                        self._batches,
                    ),
                    start_to_close_timeout=CONSOLIDATE.start_to_close,
                    retry_policy=CONSOLIDATE.retry,
                    heartbeat_timeout=CONSOLIDATE.heartbeat,
                )
                self._totals = self._totals.plus(result.counts)
                self._backlog = result.backlog
                self._batches += 1
                runs_batches += 1
                if not result.enabled or result.counts.facts == 0 or result.backlog == 0:
                    break
                if runs_batches >= BATCHES_PER_RUN:
                    workflow.continue_as_new(
                        replace(
                            request,
                            operation_id=operation_id,
                            totals=self._totals,
                            batches=self._batches,
                        )
                    )
            if not self._more:
                return

    async def _finish(self, operation_id: str, status: OperationStatus, error: str | None) -> None:
        await workflow.execute_activity_method(
            ConsolidationActivities.finish_consolidation,
            ConsolidationDone(operation_id, status, self._totals, self._batches, error),
            start_to_close_timeout=policies.BOOKKEEPING.start_to_close,
            retry_policy=policies.BOOKKEEPING.retry,
            heartbeat_timeout=policies.BOOKKEEPING.heartbeat,
        )


@workflow.defn
class ConsolidationSweepWorkflow:
    @workflow.run
    async def run(self, sweep: SweepRequest) -> int:
        """Request a consolidation of every bank with work; returns how many."""
        banks: list[str] = await workflow.execute_activity_method(
            ConsolidationActivities.find_consolidation_work,
            sweep,
            start_to_close_timeout=policies.DATABASE.start_to_close,
            retry_policy=policies.DATABASE.retry,
            heartbeat_timeout=policies.DATABASE.heartbeat,
        )
        for bank_id in banks:
            await request_consolidation(bank_id, "schedule")
        return len(banks)


def _changed(totals: ConsolidationCounts) -> bool:
    return any((totals.created, totals.reinforced, totals.updated, totals.merged, totals.retracted))


async def _refresh_mental_models(bank_id: str) -> None:
    """Observations changed: refresh the bank's models that ask for it. A failure here is
    logged, not raised: the consolidation itself succeeded and its operation says so."""
    try:
        await refresh_after_consolidation(bank_id)
    except ActivityError as exc:
        workflow.logger.warning("mental models of %s not refreshed: %s", bank_id, _cause(exc))


def _cause(exc: BaseException) -> str:
    while isinstance(exc, ActivityError) and exc.cause is not None:
        exc = exc.cause
    return str(exc) or type(exc).__name__
