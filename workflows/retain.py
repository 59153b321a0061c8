"""RetainWorkflow: one per retain request, its documents taken through the shared pipeline.

The server stages the request's documents (engine/retain/documents.py) before starting it;
the workflow pages through their references and runs them in batches
(workflows/pipeline.py), so many small documents share a handful of activities and no
payload carries memory text. One document failing fails the request (the caller sent it as
one); whatever the outcome, the operation's staging is discarded and its documents released.
"""

from __future__ import annotations

import asyncio

from temporalio import workflow
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    ChildWorkflowError,
    is_cancelled_exception,
)

with workflow.unsafe.imports_passed_through():
    from activities.pipeline import PipelineActivities
    from activities.retain import RetainActivities
    from engine.retain.payloads import (
        BatchJob,
        BatchResult,
        DocumentPage,
        DocumentRef,
        EndStatus,
        OperationEnd,
        OperationUpdate,
        RetainRequest,
        RetainResult,
    )
    from workflows import policies
    from workflows.policies import options

from workflows.consolidation import SETTLE_AFTER_RETAIN, request_consolidation
from workflows.errors import error_message
from workflows.pipeline import run_batches, signal_released
from workflows.webhooks import notify


class DocumentsFailed(Exception):
    """Some documents of the request could not be stored (the first reason is named)."""


@workflow.defn
class RetainWorkflow:
    def __init__(self) -> None:
        self._documents_total = 0
        self._documents_done = 0
        self._facts = 0
        self._totals = [0, 0, 0, 0, 0]  # facts added/removed, chunks added/removed, links
        self._failures: list[str] = []

    @workflow.query
    def progress(self) -> dict[str, int]:
        return {
            "documents_total": self._documents_total,
            "documents_done": self._documents_done,
            "facts_added": self._facts,
        }

    @workflow.run
    async def run(self, request: RetainRequest) -> RetainResult:
        self._documents_total = request.documents_total
        try:
            await self._update(OperationUpdate(request.operation_id, "running", self.progress()))
            await self._run_batches(request)
            if self._failures:
                raise DocumentsFailed(
                    f"{len(self._failures)} of {self._documents_total} documents failed"
                    f" (first: {self._failures[0]})"
                )
        except asyncio.CancelledError:
            await self._end(request, "cancelled", "cancelled")
            raise
        except (ActivityError, ChildWorkflowError, DocumentsFailed) as exc:
            if is_cancelled_exception(exc):
                # Cancelled while a step ran (one retrying forever, say): the step reports the
                # cancellation as its failure; it reads "cancelled" like any other cancel.
                await self._end(request, "cancelled", "cancelled")
                raise
            await self._end(request, "failed", error_message(exc))
            if workflow.patched("webhooks-after-retain"):
                await notify(
                    request.bank_id,
                    f"retain:{request.operation_id}",
                    "retain.failed",
                    {"operation_id": request.operation_id, "error": error_message(exc)},
                )
            raise ApplicationError(error_message(exc), non_retryable=True) from exc
        await self._end(request, "completed", None)
        added, removed, chunks_added, chunks_removed, links = self._totals
        if workflow.patched("webhooks-after-retain"):
            await notify(
                request.bank_id,
                f"retain:{request.operation_id}",
                "retain.completed",
                {
                    "operation_id": request.operation_id,
                    "documents": self._documents_done,
                    "facts_added": added,
                    "facts_removed": removed,
                },
            )
        if workflow.patched("consolidate-after-retain") and (added > 0 or removed > 0):
            await self._consolidate(request)
        # The document ids are in the operation's result (they may be many).
        return RetainResult(
            request.operation_id,
            self._documents_done,
            added,
            removed,
            chunks_added,
            chunks_removed,
            links,
        )

    async def _consolidate(self, request: RetainRequest) -> None:
        """Turn the new facts into observations: the bank's consolidation runs on its own
        (it outlives this workflow); a failure to request it leaves them to the schedule."""
        if request.options.enable_observations:
            await request_consolidation(request.bank_id, "retain", SETTLE_AFTER_RETAIN)

    async def _run_batches(self, request: RetainRequest) -> None:
        def job_of(refs: list[DocumentRef]) -> BatchJob:
            return BatchJob(request.bank_id, request.operation_id, "retain", refs, request.options)

        async def on_done(
            refs: list[DocumentRef], outcome: BatchResult | ChildWorkflowError
        ) -> None:
            if isinstance(outcome, ChildWorkflowError):
                # Recorded, not raised: the other batches finish before the operation ends.
                self._failures += [f"{r.document_id}: {error_message(outcome)}" for r in refs]
                return
            for done in outcome.done:
                r = done.result
                self._documents_done += 1
                self._facts += r.facts_added
                for i, value in enumerate(
                    (
                        r.facts_added,
                        r.facts_removed,
                        r.chunks_added,
                        r.chunks_removed,
                        r.links_added,
                    )
                ):
                    self._totals[i] += value
            self._failures += [f"{f.document_id}: {f.message}" for f in outcome.failed]
            await self._update(OperationUpdate(request.operation_id, "running", self.progress()))

        after = -1
        while True:
            refs: list[DocumentRef] = await workflow.execute_activity_method(
                PipelineActivities.list_documents,
                DocumentPage("retain", request.operation_id, after, policies.PAGE),
                **options(policies.DATABASE),
            )
            if not refs:
                return
            await run_batches(job_of, refs, request.documents_total, on_done)
            after = refs[-1].seq

    async def _end(self, request: RetainRequest, status: EndStatus, error: str | None) -> None:
        waiters: list[str] = await workflow.execute_activity_method(
            PipelineActivities.end_operation,
            OperationEnd(
                request.operation_id,
                status,
                self.progress(),
                error,
                result_from_documents=status == "completed",
            ),
            **options(policies.BOOKKEEPING),
        )
        await signal_released(waiters)

    async def _update(self, update: OperationUpdate) -> None:
        await workflow.execute_activity_method(
            RetainActivities.update_operation, update, **options(policies.BOOKKEEPING)
        )
