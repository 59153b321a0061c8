"""ImportWorkflow (one per import) and ImportDocumentWorkflow (one per imported document).

The parent pages through the staged document references and runs at most
MAX_PARALLEL_DOCUMENTS document workflows at once. Each document workflow loads its own
items from staging and runs retain's steps (plan, extract, embed, resolve, link, upsert), so
no payload carries more than one document. Document workflows take retain's per-document
workflow id, so an import and a retain never write one document at once. The parent
continues as new every `documents_per_run` documents, so its history stays small however large
the import; a crashed worker's workflows resume from their histories on the next worker and
every step is idempotent, so nothing is lost or doubled.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ChildWorkflowError, WorkflowAlreadyStartedError

with workflow.unsafe.imports_passed_through():
    from activities.imports import ImportActivities
    from activities.retain import RetainActivities
    from engine.imports.payloads import (
        DocumentProgress,
        ImportDocumentJob,
        ImportFinish,
        ImportPage,
        ImportProgress,
        ImportRequest,
        ImportResult,
        ImportTotals,
        ImportUpsert,
        StagedDocumentRef,
    )
    from engine.retain.payloads import (
        ExtractionBatch,
        LinkOptions,
        OperationUpdate,
        RetainPlan,
        StagedFacts,
        UpsertResult,
    )
    from workflows import policies
    from workflows.errors import error_message
    from workflows.retain import document_workflow_id

from workflows.consolidation import SETTLE_AFTER_RETAIN, request_consolidation

# Document references fetched per activity call.
IMPORT_PAGE = 64
# Document workflows running at once per import. Each runs several activities in parallel,
# and the worker runs 32 activities at once: 8 documents keep it busy without starving
# concurrent retains.
MAX_PARALLEL_DOCUMENTS = 8
# The operations row is updated at most this often while the import runs.
PROGRESS_INTERVAL = timedelta(seconds=1)
# Failed documents named in the result; the rest are only counted.
MAX_FAILURES_REPORTED = 20
# Shares of a document's work, in thousandths, reported after extraction and embedding.
EXTRACTED_PERMILLE = 600
EMBEDDED_PERMILLE = 800
# Facts per link_facts call. Each call first loads the bank's in-flight staged facts (up to
# links.IN_FLIGHT_LIMIT, which a bulk import always reaches), so imports link in larger
# batches than retain's LINK_BATCH to pay that fixed cost less often. LoCoMo: 256 took 61
# calls and 239 s of activity time, 1024 took 19 calls and 108 s (loaded machine).
IMPORT_LINK_BATCH = 1024
# Facts per embed_facts call. One call runs its model batches through the worker's ordered
# gate in the document's order; a few large calls per document, rather than one per model
# batch, keep the worker's activity slots free for other documents' link and upsert steps
# (with one call per 128 facts, calls waiting their turn filled all 32 slots and the first
# document could not link until the last one had embedded).
IMPORT_EMBED_BATCH = 1024
# Chunks per extract_facts call. Retain's EXTRACT_BATCH (4) suits a few chunks per request;
# an import's documents have hundreds, and every activity costs Temporal history events and
# server CPU: LoCoMo with 4 per call made 154 calls and the dev server spent 18.8 CPU s on
# the import; with 16, 43 calls and 11.2-11.7 CPU s (~68 ms of server CPU per activity).
# The chunks of one call are still extracted concurrently in the CPU pool.
IMPORT_EXTRACT_BATCH = 16
# A document workflow reports progress only after moving this far (bounds the signals).
PROGRESS_STEP_PERMILLE = 100


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

    @workflow.signal
    def document_progress(self, update: DocumentProgress) -> None:
        records = self._running.get(update.seq)
        if records is not None:
            done = records * min(update.permille, 1000) // 1000
            self._partial[update.seq] = max(self._partial.get(update.seq, 0), done)
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
                refs: list[StagedDocumentRef] = await workflow.execute_activity_method(
                    ImportActivities.list_import_documents,
                    ImportPage(
                        request.operation_id,
                        cursor - 1,
                        min(IMPORT_PAGE, request.documents_per_run - processed),
                    ),
                    start_to_close_timeout=policies.DATABASE.start_to_close,
                    retry_policy=policies.DATABASE.retry,
                    heartbeat_timeout=policies.DATABASE.heartbeat,
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
            await self._update(request.operation_id, "cancelled", error="cancelled")
            raise
        await self._stop_writer(writer)
        await workflow.execute_activity_method(
            ImportActivities.finish_import,
            ImportFinish(request.operation_id, self._facts_added + self._facts_removed),
            start_to_close_timeout=policies.DATABASE.start_to_close,
            retry_policy=policies.DATABASE.retry,
            heartbeat_timeout=policies.DATABASE.heartbeat,
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
            await self._update(request.operation_id, "failed", result=result, error=error)
        else:
            await self._update(request.operation_id, "completed", result=result)
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

    async def _run_documents(self, request: ImportRequest, refs: list[StagedDocumentRef]) -> None:
        slots = asyncio.Semaphore(MAX_PARALLEL_DOCUMENTS)

        async def run_one(ref: StagedDocumentRef) -> None:
            async with slots:
                job = ImportDocumentJob(
                    request.bank_id,
                    request.operation_id,
                    ref.seq,
                    ref.document_id,
                    ref.records,
                    request.options,
                )
                self._running[ref.seq] = ref.records
                try:
                    result = await self._run_child(job)
                except ChildWorkflowError as exc:
                    self._failed += 1
                    if len(self._failures) < MAX_FAILURES_REPORTED:
                        self._failures.append(f"{ref.document_id}: {error_message(exc)}")
                else:
                    self._documents += 1
                    self._items += ref.records
                    self._facts_added += result.facts_added
                    self._facts_removed += result.facts_removed
                    self._chunks_added += result.chunks_added
                    self._chunks_removed += result.chunks_removed
                    self._links_added += result.links_added
                finally:
                    self._running.pop(ref.seq, None)
                    self._partial.pop(ref.seq, None)
                    self._dirty = True

        await asyncio.gather(*(run_one(ref) for ref in refs))

    async def _run_child(self, job: ImportDocumentJob) -> UpsertResult:
        while True:
            try:
                return await workflow.execute_child_workflow(
                    ImportDocumentWorkflow.run,
                    job,
                    id=document_workflow_id(job.bank_id, job.document_id),
                )
            except WorkflowAlreadyStartedError:
                # A retain (or another import) is writing this document: wait, then ours.
                await workflow.sleep(policies.DOCUMENT_BUSY_WAIT)

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
            start_to_close_timeout=policies.BOOKKEEPING.start_to_close,
            retry_policy=policies.BOOKKEEPING.retry,
            heartbeat_timeout=policies.BOOKKEEPING.heartbeat,
        )


@workflow.defn
class ImportDocumentWorkflow:
    """Retain's steps for one staged document, reporting its progress to the import."""

    def __init__(self) -> None:
        self._reported = 0

    @workflow.run
    async def run(self, job: ImportDocumentJob) -> UpsertResult:
        plan: RetainPlan = await workflow.execute_activity_method(
            ImportActivities.plan_import_document,
            job,
            start_to_close_timeout=policies.DATABASE.start_to_close,
            retry_policy=policies.DATABASE.retry,
            heartbeat_timeout=policies.DATABASE.heartbeat,
        )
        document = plan.documents[0]
        chunks = document.new_chunks
        large_extract = workflow.patched("import-extract-batch")
        size = IMPORT_EXTRACT_BATCH if large_extract else policies.EXTRACT_BATCH
        extracted_chunks = 0

        async def extract(start: int) -> StagedFacts:
            nonlocal extracted_chunks
            staged: StagedFacts = await workflow.execute_activity_method(
                RetainActivities.extract_facts,
                ExtractionBatch(
                    job.operation_id,
                    job.options.extraction_mode,
                    chunks[start : start + size],
                    job.options.retain_mission,
                ),
                start_to_close_timeout=policies.EXTRACT.start_to_close,
                retry_policy=policies.EXTRACT.retry,
                heartbeat_timeout=policies.EXTRACT.heartbeat,
            )
            extracted_chunks += min(size, len(chunks) - start)
            await self._report(job, EXTRACTED_PERMILLE * extracted_chunks // max(len(chunks), 1))
            return staged

        batches = await asyncio.gather(*(extract(s) for s in range(0, len(chunks), size)))
        fact_ids = [fid for staged in batches for fid in staged.fact_ids]
        large = workflow.patched("import-embed-batch")
        embed_batch = IMPORT_EMBED_BATCH if large else policies.EMBED_BATCH
        await asyncio.gather(
            *(
                workflow.execute_activity_method(
                    RetainActivities.embed_facts,
                    StagedFacts(
                        job.bank_id,
                        job.operation_id,
                        fact_ids[s : s + embed_batch],
                        priority=job.seq + 1,
                    ),
                    start_to_close_timeout=policies.EMBED.start_to_close,
                    retry_policy=policies.EMBED.retry,
                    heartbeat_timeout=policies.EMBED.heartbeat,
                )
                for s in range(0, len(fact_ids), embed_batch)
            )
        )
        await self._report(job, EMBEDDED_PERMILLE)
        if fact_ids:
            await workflow.execute_activity_method(
                RetainActivities.resolve_entities,
                StagedFacts(job.bank_id, job.operation_id, fact_ids),
                start_to_close_timeout=policies.DATABASE.start_to_close,
                retry_policy=policies.DATABASE.retry,
                heartbeat_timeout=policies.DATABASE.heartbeat,
            )
        options = job.options
        linking = (
            options.enable_entity_links
            or options.enable_semantic_links
            or options.enable_temporal_links
            or options.enable_causal_links
        )
        await asyncio.gather(
            *(
                workflow.execute_activity_method(
                    RetainActivities.link_facts,
                    LinkOptions(
                        job.bank_id,
                        job.operation_id,
                        fact_ids[s : s + IMPORT_LINK_BATCH],
                        entity=options.enable_entity_links,
                        semantic=options.enable_semantic_links,
                        temporal=options.enable_temporal_links,
                        causal=options.enable_causal_links,
                    ),
                    start_to_close_timeout=policies.DATABASE.start_to_close,
                    retry_policy=policies.DATABASE.retry,
                    heartbeat_timeout=policies.DATABASE.heartbeat,
                )
                for s in range(0, len(fact_ids) if linking else 0, IMPORT_LINK_BATCH)
            )
        )
        result: UpsertResult = await workflow.execute_activity_method(
            ImportActivities.upsert_import_document,
            ImportUpsert(job.bank_id, job.operation_id, job.seq, document),
            start_to_close_timeout=policies.DATABASE.start_to_close,
            retry_policy=policies.DATABASE.retry,
            heartbeat_timeout=policies.DATABASE.heartbeat,
        )
        return result

    async def _report(self, job: ImportDocumentJob, permille: int) -> None:
        parent = workflow.info().parent
        if parent is None or permille - self._reported < PROGRESS_STEP_PERMILLE:
            return
        self._reported = permille
        await workflow.get_external_workflow_handle(parent.workflow_id).signal(
            ImportWorkflow.document_progress, DocumentProgress(job.seq, permille)
        )
