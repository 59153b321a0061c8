"""ImportWorkflow: one per import, its staged documents taken through the shared pipeline.

The parent pages through the staged document references and runs them in batches
(workflows/pipeline.py: the same steps, claims and staging as retain), at most
MAX_PARALLEL_BATCHES at once; a large document (a LoCoMo conversation) fills a batch alone.
No payload carries a document. A document that fails is named in the result and the others
go on. The parent continues as new every `documents_per_run` documents, so its history stays
small however large the import; a crashed worker's workflows resume from their histories on
the next worker and every step is idempotent, so nothing is lost or doubled.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ChildWorkflowError

with workflow.unsafe.imports_passed_through():
    from activities.imports import ImportActivities
    from activities.pipeline import PipelineActivities
    from activities.retain import RetainActivities
    from engine.imports.payloads import (
        ImportFinish,
        ImportProgress,
        ImportRequest,
        ImportResult,
        ImportTotals,
    )
    from engine.retain.payloads import (
        BatchJob,
        BatchProgress,
        BatchResult,
        DocumentPage,
        DocumentRef,
        EndStatus,
        OperationEnd,
        OperationUpdate,
    )
    from workflows import policies
    from workflows.errors import error_message
    from workflows.policies import options

from workflows.consolidation import SETTLE_AFTER_RETAIN, request_consolidation
from workflows.pipeline import BATCH_PROGRESS, run_batches, signal_released

# Document references fetched per activity call.
IMPORT_PAGE = 64
# The operations row is updated at most this often while the import runs.
PROGRESS_INTERVAL = timedelta(seconds=1)
# Failed documents named in the result; the rest are only counted.
MAX_FAILURES_REPORTED = 20


def import_workflow_id(bank_id: str, operation_id: str) -> str:
    return f"import:{bank_id}:{operation_id}"


@workflow.defn
class ImportWorkflow:
    def __init__(self) -> None:
        self._documents_total = 0
        self._items_total = 0
        self._documents = 0
        self._items = 0
        self._facts_added = 0
        self._facts_removed = 0
        self._chunks_added = 0
        self._chunks_removed = 0
        self._links_added = 0
        self._failed = 0
        self._failures: list[str] = []
        self._running: dict[int, int] = {}  # seq -> records, for documents in flight
        self._partial: dict[int, int] = {}  # seq -> records done so far
        self._dirty = False
        self._closing = False

    @workflow.query
    def progress(self) -> ImportProgress:
        return ImportProgress(
            documents_total=self._documents_total,
            documents_done=self._documents + self._failed,
            documents_failed=self._failed,
            items_total=self._items_total,
            items_done=self._items + sum(self._partial.values()),
            facts_added=self._facts_added,
        )

    @workflow.signal(name=BATCH_PROGRESS)
    def batch_progress(self, update: BatchProgress) -> None:
        for seq in update.seqs:
            records = self._running.get(seq)
            if records is not None:
                done = records * min(update.permille, 1000) // 1000
                self._partial[seq] = max(self._partial.get(seq, 0), done)
                self._dirty = True

    @workflow.run
    async def run(self, request: ImportRequest) -> ImportResult:
        self._restore(request)
        writer = asyncio.create_task(self._write_progress(request.operation_id))
        cursor = request.cursor
        try:
            await self._update(request.operation_id, "running")
            processed = 0
            while True:
                refs: list[DocumentRef] = await workflow.execute_activity_method(
                    PipelineActivities.list_documents,
                    DocumentPage(
                        "import",
                        request.operation_id,
                        cursor - 1,
                        min(IMPORT_PAGE, request.documents_per_run - processed),
                    ),
                    **options(policies.DATABASE),
                )
                if not refs:
                    break
                await self._run_documents(request, refs)
                cursor = refs[-1].seq + 1
                processed += len(refs)
                if (
                    processed >= request.documents_per_run
                    or workflow.info().is_continue_as_new_suggested()
                ):
                    await self._stop_writer(writer)
                    workflow.continue_as_new(replace(request, cursor=cursor, done=self._totals()))
        except asyncio.CancelledError:
            await self._stop_writer(writer)
            await self._end(request.operation_id, "cancelled", error="cancelled")
            raise
        await self._stop_writer(writer)
        await workflow.execute_activity_method(
            ImportActivities.finish_import,
            ImportFinish(
                request.operation_id,
                self._facts_added + self._facts_removed,
                keep_input=self._failed > 0,
            ),
            **options(policies.DATABASE),
        )
        totals = self._totals()
        result = {
            "documents": totals.documents,
            "documents_failed": totals.documents_failed,
            "items": totals.items,
            "facts_added": totals.facts_added,
            "facts_removed": totals.facts_removed,
            "chunks_added": totals.chunks_added,
            "chunks_removed": totals.chunks_removed,
            "links_added": totals.links_added,
            "failures": totals.failures,
        }
        if totals.documents_failed:
            error = (
                f"{totals.documents_failed} of {self._documents_total} documents failed"
                f" (first: {totals.failures[0]}); importing the file again retries them"
            )
            await self._end(request.operation_id, "failed", result=result, error=error)
        else:
            await self._end(request.operation_id, "completed", result=result)
        changed = totals.facts_added > 0 or totals.facts_removed > 0
        if workflow.patched("consolidate-after-import") and changed:
            await self._consolidate(request)
        return ImportResult(request.operation_id, totals)

    async def _consolidate(self, request: ImportRequest) -> None:
        """The imported facts become observations in the bank's own consolidation run (it
        outlives this workflow); if it cannot be requested, the schedule runs it later."""
        if request.options.enable_observations:
            await request_consolidation(request.bank_id, "import", SETTLE_AFTER_RETAIN)

    def _restore(self, request: ImportRequest) -> None:
        done = request.done
        self._documents_total = request.documents_total
        self._items_total = request.items_total
        self._documents = done.documents
        self._items = done.items
        self._facts_added = done.facts_added
        self._facts_removed = done.facts_removed
        self._chunks_added = done.chunks_added
        self._chunks_removed = done.chunks_removed
        self._links_added = done.links_added
        self._failed = done.documents_failed
        self._failures = list(done.failures)

    def _totals(self) -> ImportTotals:
        return ImportTotals(
            documents=self._documents,
            items=self._items,
            facts_added=self._facts_added,
            facts_removed=self._facts_removed,
            chunks_added=self._chunks_added,
            chunks_removed=self._chunks_removed,
            links_added=self._links_added,
            documents_failed=self._failed,
            failures=list(self._failures),
        )

    async def _run_documents(self, request: ImportRequest, refs: list[DocumentRef]) -> None:
        def job_of(batch: list[DocumentRef]) -> BatchJob:
            for ref in batch:
                self._running[ref.seq] = ref.records
            # Embedding in import order (engine/retain/gate.py): a retain's 0 goes first.
            return BatchJob(
                request.bank_id,
                request.operation_id,
                "import",
                batch,
                request.options,
                priority=batch[0].seq + 1,
            )

        async def on_done(
            batch: list[DocumentRef], outcome: BatchResult | ChildWorkflowError
        ) -> None:
            failures: dict[int, str] = {}
            if isinstance(outcome, ChildWorkflowError):
                failures = {ref.seq: error_message(outcome) for ref in batch}
                done = []
            else:
                failures = {f.seq: f.message for f in outcome.failed}
                done = outcome.done
            records = {ref.seq: ref for ref in batch}
            for item in done:
                r = item.result
                self._documents += 1
                self._items += records[item.seq].records
                self._facts_added += r.facts_added
                self._facts_removed += r.facts_removed
                self._chunks_added += r.chunks_added
                self._chunks_removed += r.chunks_removed
                self._links_added += r.links_added
            for seq, message in sorted(failures.items()):
                self._failed += 1
                if len(self._failures) < MAX_FAILURES_REPORTED:
                    self._failures.append(f"{records[seq].document_id}: {message}")
            for ref in batch:
                self._running.pop(ref.seq, None)
                self._partial.pop(ref.seq, None)
            self._dirty = True

        await run_batches(job_of, refs, len(refs), on_done)

    async def _write_progress(self, operation_id: str) -> None:
        """Mirror the progress into the operations row, at most once per interval."""
        while True:
            await workflow.wait_condition(lambda: self._dirty or self._closing)
            if self._closing:
                return
            self._dirty = False
            await self._update(operation_id, "running")
            try:
                await workflow.wait_condition(lambda: self._closing, timeout=PROGRESS_INTERVAL)
            except TimeoutError:
                continue

    async def _stop_writer(self, writer: asyncio.Task[None]) -> None:
        self._closing = True
        await writer

    async def _update(
        self,
        operation_id: str,
        status: str,
        result: dict[str, object] | None = None,
        error: str | None = None,
    ) -> None:
        await workflow.execute_activity_method(
            RetainActivities.update_operation,
            OperationUpdate(
                operation_id,
                status,  # type: ignore[arg-type]
                self.progress().as_counts(),
                result,
                error,
            ),
            **options(policies.BOOKKEEPING),
        )

    async def _end(
        self,
        operation_id: str,
        status: EndStatus,
        result: dict[str, object] | None = None,
        error: str | None = None,
    ) -> None:
        """The final status; the operation's staging is discarded and its documents released."""
        waiters: list[str] = await workflow.execute_activity_method(
            PipelineActivities.end_operation,
            OperationEnd(
                operation_id,
                status,
                self.progress().as_counts(),
                error,
                result,
            ),
            **options(policies.BOOKKEEPING),
        )
        await signal_released(waiters)
