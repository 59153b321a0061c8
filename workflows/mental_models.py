"""MentalModelRefreshWorkflow (one per model at a time) and what asks for it.

The workflow id `mental-model-refresh:{bank}:{model}` makes refreshes of one model never
overlap. Asking while one runs signals it (`request`): the asks that arrive during a pass
share the next pass, so a burst of consolidations costs at most one extra refresh. Each
pass plans (activity: the model, its skip decision, the min refresh interval), waits out the
interval with a workflow timer when an automatic refresh comes too soon, runs reflect on
each question as a child `ReflectWorkflow` (by name: it lives in workflows/reflect.py) that
excludes the model itself, and stores the answer as a new version.

A model's cron runs a Temporal Schedule (id `engram-mental-model-{bank}-{model}`, or
`engram-report-{bank}-{model}` for a report) whose action starts MentalModelTriggerWorkflow,
which asks for a refresh like a consolidation does: a schedule cannot start the refresh
itself, because it appends the fire time to the workflow ids it starts.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import (
    ActivityError,
    ChildWorkflowError,
    FailureError,
    WorkflowAlreadyStartedError,
)

with workflow.unsafe.imports_passed_through():
    from activities.mental_models import MentalModelActivities
    from engine.mental_models.payloads import (
        AUTOMATIC,
        Answer,
        BeginRefresh,
        ConsolidatedBank,
        FailureRecord,
        FinishRefresh,
        OperationStatus,
        PlanRequest,
        RefreshAsk,
        RefreshOutcome,
        RefreshPlan,
        RefreshReason,
        RefreshRequest,
        StoreRequest,
        TriggerRequest,
    )
    from engine.reflect.payloads import ReflectInput, ReflectOutput
    from workflows import policies

REFLECT_WORKFLOW = "ReflectWorkflow"
# Start-or-signal attempts when a refresh finishes between our start and our signal.
REQUEST_ATTEMPTS = 3
# Passes per run before it continues as new, so a model refreshed forever keeps a short
# history; asks still queued travel into the new run.
PASSES_PER_RUN = 50


def refresh_workflow_id(bank_id: str, model_id: str) -> str:
    return f"mental-model-refresh:{bank_id}:{model_id}"


async def request_refresh(bank_id: str, model_id: str, reason: RefreshReason) -> bool:
    """From a workflow: start the model's refresh, or signal the running one. The child is
    abandoned, so it outlives the caller. False when neither worked."""
    ask = RefreshAsk(reason)
    workflow_id = refresh_workflow_id(bank_id, model_id)
    for _ in range(REQUEST_ATTEMPTS):
        try:
            await workflow.start_child_workflow(
                MentalModelRefreshWorkflow.run,
                RefreshRequest(bank_id, model_id, [ask]),
                id=workflow_id,
                parent_close_policy=workflow.ParentClosePolicy.ABANDON,
            )
            return True
        except WorkflowAlreadyStartedError:
            pass
        try:
            handle = workflow.get_external_workflow_handle_for(
                MentalModelRefreshWorkflow.run, workflow_id
            )
            await handle.signal(MentalModelRefreshWorkflow.request, ask)
            return True
        except FailureError as exc:  # it completed between the start and the signal
            workflow.logger.info("signal to %s failed (%s); starting again", workflow_id, exc)
    workflow.logger.warning("refresh of mental model %s/%s not requested", bank_id, model_id)
    return False


async def refresh_after_consolidation(bank_id: str) -> int:
    """Ask for a refresh of every model of the bank whose trigger wants one after a
    consolidation; returns how many were asked."""
    model_ids: list[str] = await workflow.execute_activity_method(
        MentalModelActivities.find_models_after_consolidation,
        ConsolidatedBank(bank_id),
        start_to_close_timeout=policies.DATABASE.start_to_close,
        retry_policy=policies.DATABASE.retry,
        heartbeat_timeout=policies.DATABASE.heartbeat,
    )
    asked = 0
    for model_id in model_ids:
        asked += await request_refresh(bank_id, model_id, "consolidation")
    return asked


@workflow.defn
class MentalModelTriggerWorkflow:
    """What a model's schedule starts: one ask for a refresh. The schedule of a model that
    no longer exists (its bank was deleted) is deleted instead."""

    @workflow.run
    async def run(self, trigger: TriggerRequest) -> bool:
        retired: bool = await workflow.execute_activity_method(
            MentalModelActivities.retire_orphan_schedule,
            trigger,
            start_to_close_timeout=policies.DATABASE.start_to_close,
            retry_policy=policies.DATABASE.retry,
            heartbeat_timeout=policies.DATABASE.heartbeat,
        )
        if retired:
            return False
        return await request_refresh(trigger.bank_id, trigger.model_id, trigger.reason)


@workflow.defn
class MentalModelRefreshWorkflow:
    def __init__(self) -> None:
        self._asks: list[RefreshAsk] = []
        self._passes = 0

    @workflow.signal
    def request(self, ask: RefreshAsk) -> None:
        """Another refresh was asked for: it joins the next pass."""
        self._asks.append(ask)

    def _manual_ask(self) -> bool:
        return any(a.force or a.reason not in AUTOMATIC for a in self._asks)

    @workflow.query
    def pending(self) -> int:
        return len(self._asks)

    @workflow.run
    async def run(self, request: RefreshRequest) -> RefreshOutcome:
        self._asks = [*request.asks, *self._asks]
        outcome = RefreshOutcome(request.model_id, "skipped", reason="nothing was asked")
        while self._asks:
            if self._passes >= PASSES_PER_RUN:
                workflow.continue_as_new(
                    RefreshRequest(request.bank_id, request.model_id, list(self._asks))
                )
            asks, self._asks = self._asks, []
            self._passes += 1
            outcome = await self._pass(request, asks)
        return outcome

    async def _pass(self, request: RefreshRequest, asks: list[RefreshAsk]) -> RefreshOutcome:
        operations = [a.operation_id or f"refresh-{workflow.uuid4()}" for a in asks]
        await workflow.execute_activity_method(
            MentalModelActivities.begin_refresh,
            BeginRefresh(
                request.bank_id, request.model_id, workflow.info().workflow_id, operations
            ),
            start_to_close_timeout=policies.DATABASE.start_to_close,
            retry_policy=policies.DATABASE.retry,
            heartbeat_timeout=policies.DATABASE.heartbeat,
        )
        try:
            outcome = await self._refresh(request, asks, operations)
        except asyncio.CancelledError:
            await self._finish(operations, "cancelled", {}, "cancelled")
            raise
        except (ActivityError, ChildWorkflowError) as exc:
            error = _cause(exc)
            await workflow.execute_activity_method(
                MentalModelActivities.record_refresh_failure,
                FailureRecord(request.bank_id, request.model_id, error, workflow.now()),
                start_to_close_timeout=policies.DATABASE.start_to_close,
                retry_policy=policies.DATABASE.retry,
                heartbeat_timeout=policies.DATABASE.heartbeat,
            )
            await self._finish(operations, "failed", {"status": "failed"}, error)
            return RefreshOutcome(request.model_id, "failed", reason=error)
        result: dict[str, Any] = {
            "status": outcome.status,
            "version": outcome.version,
            "reason": outcome.reason,
            "asked_by": sorted({a.reason for a in asks}),
        }
        if outcome.status == "missing":
            await self._finish(operations, "failed", result, outcome.reason)
        else:
            await self._finish(operations, "completed", result, None)
        return outcome

    async def _refresh(
        self, request: RefreshRequest, asks: list[RefreshAsk], operations: list[str]
    ) -> RefreshOutcome:
        force = any(a.force for a in asks)
        automatic = all(a.reason in AUTOMATIC for a in asks)
        plan = await self._plan(request, force, automatic)
        if plan.exists and plan.wait_seconds > 0:
            # Too soon after the last refresh: wait (a manual ask ends the wait), then
            # decide again. Asks arriving meanwhile join this pass: `asks` and `operations`
            # are extended in place, so the caller finishes their operations too.
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(
                    self._manual_ask, timeout=timedelta(seconds=plan.wait_seconds)
                )
            late, self._asks = self._asks, []
            asks += late
            operations += [a.operation_id or f"refresh-{workflow.uuid4()}" for a in late]
            if late:
                await workflow.execute_activity_method(
                    MentalModelActivities.begin_refresh,
                    BeginRefresh(
                        request.bank_id,
                        request.model_id,
                        workflow.info().workflow_id,
                        operations[-len(late) :],
                    ),
                    start_to_close_timeout=policies.DATABASE.start_to_close,
                    retry_policy=policies.DATABASE.retry,
                    heartbeat_timeout=policies.DATABASE.heartbeat,
                )
            force = force or any(a.force for a in late)
            plan = await self._plan(request, force, False)
        if not plan.exists:
            return RefreshOutcome(request.model_id, "missing", reason=plan.reason)
        if not plan.run:
            return RefreshOutcome(request.model_id, "skipped", reason=plan.reason)
        answers = []
        for question in plan.questions:
            output = await workflow.execute_child_workflow(
                REFLECT_WORKFLOW,
                ReflectInput(
                    bank_id=request.bank_id,
                    query=question,
                    now=workflow.now(),
                    budget=plan.budget,
                    max_tokens=plan.max_tokens,
                    response_schema=plan.response_schema,
                    tags=plan.tags,
                    tags_match=plan.tags_match,
                    fact_types=plan.fact_types,
                    exclude_mental_models=plan.exclude_mental_models,
                    exclude_mental_model_ids=[request.model_id, *plan.exclude_mental_model_ids],
                    include_trace=plan.keep_trace,
                ),
                result_type=ReflectOutput,
                id=f"{workflow.info().workflow_id}:reflect:{workflow.uuid4()}",
            )
            answers.append(Answer(question, output))
        version: int = await workflow.execute_activity_method(
            MentalModelActivities.store_refresh,
            StoreRequest(
                request.bank_id,
                request.model_id,
                operations[0],
                answers,
                plan.digest,
                plan.reason,
                workflow.now(),
            ),
            start_to_close_timeout=policies.DATABASE.start_to_close,
            retry_policy=policies.DATABASE.retry,
            heartbeat_timeout=policies.DATABASE.heartbeat,
        )
        if version == 0:
            return RefreshOutcome(request.model_id, "missing", reason="deleted while refreshing")
        return RefreshOutcome(request.model_id, "refreshed", version, plan.reason)

    async def _plan(self, request: RefreshRequest, force: bool, automatic: bool) -> RefreshPlan:
        plan: RefreshPlan = await workflow.execute_activity_method(
            MentalModelActivities.plan_refresh,
            PlanRequest(request.bank_id, request.model_id, workflow.now(), force, automatic),
            start_to_close_timeout=policies.DATABASE.start_to_close,
            retry_policy=policies.DATABASE.retry,
            heartbeat_timeout=policies.DATABASE.heartbeat,
        )
        return plan

    async def _finish(
        self,
        operations: list[str],
        status: OperationStatus,
        result: dict[str, Any],
        error: str | None,
    ) -> None:
        await workflow.execute_activity_method(
            MentalModelActivities.finish_refresh,
            FinishRefresh(operations, status, result, error),
            start_to_close_timeout=policies.BOOKKEEPING.start_to_close,
            retry_policy=policies.BOOKKEEPING.retry,
            heartbeat_timeout=policies.BOOKKEEPING.heartbeat,
        )


def _cause(exc: BaseException) -> str:
    while isinstance(exc, (ActivityError, ChildWorkflowError)) and exc.cause is not None:
        exc = exc.cause
    return str(exc) or type(exc).__name__
