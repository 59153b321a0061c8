"""ReembedWorkflow: switch the database to another embedding model (engine/reembed.py).

One run per database (workflow id `REEMBED_WORKFLOW_ID`). Fill in batches, build the new
index, switch, wait for every process to follow, sweep the gap. Cancelled before the switch,
it drops the new columns and nothing changed; after the switch it finishes. Long runs
continue as new every `BATCHES_PER_RUN` batches so the history stays small. Payloads carry
a model name and ids, never memory text.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import CancelledError

with workflow.unsafe.imports_passed_through():
    from activities.reembed import ReembedActivities, ReembedProgress, ReembedStart, ReembedStep
    from engine import reembed
    from workflows import policies

REEMBED_WORKFLOW_ID = "engram-reembed"
BATCHES_PER_RUN = 500
# Building the HNSW index reads every vector: minutes per million facts.
INDEX = policies.ActivityPolicy(timedelta(hours=6), policies.DATABASE.retry)


@dataclass(frozen=True)
class ReembedRequest:
    model: str
    batch_size: int = reembed.BATCH_SIZE
    # Set by continue-as-new: the run already begun.
    run_id: str | None = None
    # How long processes get to follow the switch before the sweep (tests shorten it).
    grace_seconds: float = reembed.SWEEP_GRACE.total_seconds()


@workflow.defn
class ReembedWorkflow:
    @workflow.run
    async def run(self, request: ReembedRequest) -> str:
        db = policies.options(policies.DATABASE)
        embed = policies.options(policies.EMBED)
        run_id = request.run_id
        if run_id is None:
            run_id = await workflow.execute_activity_method(
                ReembedActivities.begin_reembed, ReembedStart(request.model), **embed
            )
        step = ReembedStep(run_id, request.model, request.batch_size)
        try:
            for _ in range(BATCHES_PER_RUN):
                progress: ReembedProgress = await workflow.execute_activity_method(
                    ReembedActivities.reembed_batch, step, **embed
                )
                if progress.remaining <= reembed.SWITCH_REMAINDER:
                    break
            else:
                workflow.continue_as_new(
                    ReembedRequest(request.model, request.batch_size, run_id, request.grace_seconds)
                )
            await workflow.execute_activity_method(
                ReembedActivities.index_reembed, step, **policies.options(INDEX)
            )
        except (CancelledError, asyncio.CancelledError):
            await workflow.execute_activity_method(
                ReembedActivities.abandon_reembed,
                step,
                **db,
            )
            raise
        await workflow.execute_activity_method(ReembedActivities.switch_reembed, step, **embed)
        await workflow.sleep(request.grace_seconds)
        after: str | None = None
        while True:
            after = await workflow.execute_activity_method(
                ReembedActivities.sweep_reembed,
                ReembedStep(run_id, request.model, request.batch_size, after),
                **embed,
            )
            if after is None:
                return run_id
