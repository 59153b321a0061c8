"""LifecycleWorkflow: one bank's decay, archive, merge and (opt-in) delete, in batches.

Started by the bank's Temporal Schedule (`lifecycle:{bank}`, daily by default, visible in the
Temporal UI) or on request. Each batch is one activity and one database transaction
(engine/lifecycle/maintenance.py), idempotent at the run's fixed `now`, so a crash between
batches resumes at the next one and a retried batch changes nothing twice. The run's counts
land in its operation row and in the worker's `engram_lifecycle_facts_total{action}`.
A run continues as new every `batches_per_run` batches (the history stays small for any bank
size), carrying its operation, policy, position and counts. Payloads carry ids, a time and
counts: no memory text passes through Temporal.
"""

from __future__ import annotations

from dataclasses import replace

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.lifecycle import LifecycleActivities
    from engine.lifecycle.payloads import (
        LifecycleBatchRequest,
        LifecycleBatchResult,
        LifecycleDone,
        LifecyclePlan,
        LifecycleRequest,
        LifecycleResume,
        LifecycleStart,
    )
    from workflows import policies
    from workflows.consolidation import request_consolidation
    from workflows.mental_models import request_refresh

COUNTS = ("scanned", "decayed", "archived", "merged", "deleted")


def lifecycle_workflow_id(bank_id: str) -> str:
    return f"lifecycle:{bank_id}"


@workflow.defn
class LifecycleWorkflow:
    @workflow.run
    async def run(self, request: LifecycleRequest) -> dict[str, int]:
        now = request.now or workflow.now()
        db = policies.DATABASE
        resume = request.resume
        if resume is None:
            operation_id = f"lifecycle-{workflow.uuid4()}"
            plan: LifecyclePlan = await workflow.execute_activity_method(
                LifecycleActivities.begin_lifecycle,
                LifecycleStart(request.bank_id, operation_id, workflow.info().workflow_id, now),
                start_to_close_timeout=db.start_to_close,
                retry_policy=db.retry,
                heartbeat_timeout=db.heartbeat,
            )
            if not plan.exists:
                return dict.fromkeys(COUNTS, 0)
            policy, after, seq = plan.policy, None, 0
            counts = dict.fromkeys(COUNTS, 0)
            retracted, models = 0, set[str]()
        else:
            operation_id, policy = resume.operation_id, resume.policy
            after, seq, counts = resume.after_id, resume.seq, dict(resume.counts)
            retracted, models = resume.observations_retracted, set(resume.models)
        ran = 0
        while True:
            batch: LifecycleBatchResult = await workflow.execute_activity_method(
                LifecycleActivities.lifecycle_batch,
                LifecycleBatchRequest(
                    request.bank_id, operation_id, now, policy, after, seq, request.batch_size
                ),
                start_to_close_timeout=db.start_to_close,
                retry_policy=db.retry,
                heartbeat_timeout=db.heartbeat,
            )
            for name in COUNTS:
                counts[name] += getattr(batch, name)
            retracted += batch.observations_retracted
            models.update(batch.models)
            seq += 1
            ran += 1
            if batch.last_id is None:
                break
            after = batch.last_id
            # A large bank's run would grow one history without bound: after a number of
            # batches (or when the server suggests it) the run continues as new where it
            # left off, with the same operation, policy, counts and "now".
            if (
                ran >= request.batches_per_run or workflow.info().is_continue_as_new_suggested()
            ) and workflow.patched("lifecycle-continue-as-new"):
                workflow.continue_as_new(
                    replace(
                        request,
                        now=now,
                        resume=LifecycleResume(
                            operation_id, policy, after, seq, counts, retracted, sorted(models)
                        ),
                    )
                )
        await workflow.execute_activity_method(
            LifecycleActivities.finish_lifecycle,
            LifecycleDone(request.bank_id, operation_id, now, counts),
            start_to_close_timeout=policies.BOOKKEEPING.start_to_close,
            retry_policy=policies.BOOKKEEPING.retry,
            heartbeat_timeout=policies.BOOKKEEPING.heartbeat,
        )
        if (retracted or models) and workflow.patched("lifecycle-followups"):
            # Evidence went away: observations are rebuilt from what is left and the mental
            # models that cited it are refreshed (both outlive this run).
            if retracted:
                await request_consolidation(request.bank_id, "lifecycle")
            for model_id in sorted(models):
                await request_refresh(request.bank_id, model_id, "lifecycle")
        return counts
