"""The one document pipeline that retain and import share: DocumentBatchWorkflow.

A batch is a few staged documents of one operation (many small ones, or one large one). It
claims them (engine/retain/claims.py: one writer per document), then runs the steps for all of
them together: plan → extract → embed → resolve → link → upsert, a handful of activities per
batch rather than six per document. A document another write holds is queued; the batch is
signalled when it is released and takes it then, so writes of one document never interleave
and apply in the order they queued. Payloads carry ids and counts only (the text is staged in
PostgreSQL). Every step is idempotent (deterministic fact ids, recorded upsert results), so a
retried step or a replacement worker neither loses nor doubles anything.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Awaitable, Callable

from temporalio import workflow
from temporalio.exceptions import ActivityError, ChildWorkflowError, FailureError

with workflow.unsafe.imports_passed_through():
    from activities.lifecycle import LifecycleActivities
    from activities.pipeline import PipelineActivities
    from activities.retain import RetainActivities
    from engine.retain.payloads import (
        BatchJob,
        BatchProgress,
        BatchResult,
        ChunkSlice,
        ClaimRequest,
        ClaimResult,
        DocumentFailure,
        DocumentOutcome,
        DocumentRef,
        ExtractionJob,
        LinkOptions,
        PlannedDocument,
        PlanRequest,
        PlanResult,
        StagedFacts,
        UpsertBatch,
        UpsertBatchResult,
    )
    from workflows import policies
    from workflows.policies import options

# The signal by which a batch reports progress to a parent that shows it (the import).
BATCH_PROGRESS = "batch_progress"
# A batch reports these shares of its work done (thousandths) to its parent, if it listens.
EXTRACTED_PERMILLE = 600
EMBEDDED_PERMILLE = 800


def batch_workflow_id(bank_id: str, operation_id: str, first_seq: int) -> str:
    return f"batch:{bank_id}:{operation_id}:{first_seq}"


def batches_of(
    refs: list[DocumentRef], total: int, least_records: int, largest: int, most_records: int
) -> list[list[DocumentRef]]:
    """Consecutive refs grouped into batches: an operation of `total` documents spreads over
    MAX_PARALLEL_BATCHES batches at once, but a batch takes at least `least_records` records
    (items of a retain, source records of an import) before it closes, and at most `largest`
    documents and `most_records` records (a larger document alone)."""
    spread = max(1, math.ceil(total / policies.MAX_PARALLEL_BATCHES))
    batches: list[list[DocumentRef]] = []
    current: list[DocumentRef] = []
    records = 0
    for ref in refs:
        enough = len(current) >= spread and records >= least_records
        if current and (enough or len(current) >= largest or records + ref.records > most_records):
            batches.append(current)
            current, records = [], 0
        current.append(ref)
        records += ref.records
    if current:
        batches.append(current)
    return batches


def extraction_slices(
    planned: list[PlannedDocument], size: int, chars: int | None = None
) -> list[list[ChunkSlice]]:
    """The batch's new chunks, in document order, cut into calls of at most `size` chunks
    and, given `chars`, about that many characters (a document's chunks taken as equally
    long; a call has at least one chunk): the fact ids a call returns must stay well under
    Temporal's 2 MB payload limit however many short sentences a long text holds."""
    calls: list[list[ChunkSlice]] = [[]]
    used = used_chars = 0
    for document in planned:
        each = -(-document.chars // document.new_chunks) if document.new_chunks else 0
        start = 0
        while start < document.new_chunks:
            fit = size - used
            if chars is not None and each:
                fit = min(fit, (chars - used_chars) // each)
            if fit <= 0 and used:  # the next chunk does not fit: start the next call
                calls.append([])
                used = used_chars = 0
                continue
            stop = min(document.new_chunks, start + max(fit, 1))
            calls[-1].append(ChunkSlice(document.seq, start, stop))
            used += stop - start
            used_chars += (stop - start) * each
            start = stop
    return [call for call in calls if call]


async def signal_released(waiters: list[str]) -> None:
    """Tell writers queued for released documents to claim them (one that has ended since
    cannot be told, and needs not be)."""
    for workflow_id in waiters:
        handle = workflow.get_external_workflow_handle(workflow_id)
        try:
            await handle.signal(DocumentBatchWorkflow.documents_released)
        except FailureError:
            workflow.logger.info("writer %s waiting for a document has ended", workflow_id)


@workflow.defn
class DocumentBatchWorkflow:
    def __init__(self) -> None:
        self._released = False
        self._reported = 0

    @workflow.signal
    def documents_released(self) -> None:
        self._released = True

    @workflow.run
    async def run(self, job: BatchJob) -> BatchResult:
        by_id = {ref.document_id: ref for ref in job.documents}
        waiting = list(by_id)
        done: list[DocumentOutcome] = []
        failed: list[DocumentFailure] = []
        while waiting:
            self._released = False
            claim: ClaimResult = await workflow.execute_activity_method(
                PipelineActivities.claim_documents,
                ClaimRequest(job.bank_id, job.operation_id, workflow.info().workflow_id, waiting),
                **options(policies.DATABASE),
            )
            if claim.claimed:
                refs = [by_id[d] for d in claim.claimed]
                result = await self._process(job, sorted(refs, key=lambda r: r.seq))
                done += result.done
                failed += result.failed
            waiting = claim.busy
            if waiting:
                # Signal-driven: the holder's release signals this workflow; the timeout only
                # covers a holder that ended without releasing (its claim is then stale).
                with contextlib.suppress(TimeoutError):
                    await workflow.wait_condition(
                        lambda: self._released, timeout=policies.CLAIM_RECHECK
                    )
        return BatchResult(sorted(done, key=lambda d: d.seq), failed)

    async def _process(self, job: BatchJob, refs: list[DocumentRef]) -> BatchResult:
        seqs = [r.seq for r in refs]
        plan: PlanResult = await workflow.execute_activity_method(
            PipelineActivities.plan_documents,
            PlanRequest(job.bank_id, job.operation_id, job.source, seqs, job.options.chunk_size),
            **options(policies.DATABASE),
        )
        names = {r.seq: r.document_id for r in refs}
        failed = [DocumentFailure(f.seq, names[f.seq], f.message) for f in plan.failed]
        fact_ids = await self._extract(job, plan.planned)
        await self._report(job, EXTRACTED_PERMILLE)
        queue = (
            policies.embed_queue(workflow.info().task_queue)
            if workflow.patched("embed-queue")
            else None
        )
        await self._each(
            fact_ids,
            policies.EMBED_BATCH,
            lambda ids: workflow.execute_activity_method(
                RetainActivities.embed_facts,
                StagedFacts(job.bank_id, job.operation_id, ids, priority=job.priority),
                task_queue=queue,
                **options(policies.EMBED),
            ),
        )
        await self._report(job, EMBEDDED_PERMILLE)
        await self._each(
            fact_ids,
            policies.RESOLVE_BATCH,
            lambda ids: workflow.execute_activity_method(
                RetainActivities.resolve_entities,
                StagedFacts(job.bank_id, job.operation_id, ids),
                **options(policies.DATABASE),
            ),
        )
        links = job.options
        if (
            links.enable_entity_links
            or links.enable_semantic_links
            or links.enable_temporal_links
            or links.enable_causal_links
        ):
            await self._each(
                fact_ids,
                policies.LINK_BATCH,
                lambda ids: workflow.execute_activity_method(
                    RetainActivities.link_facts,
                    LinkOptions(
                        job.bank_id,
                        job.operation_id,
                        ids,
                        entity=links.enable_entity_links,
                        semantic=links.enable_semantic_links,
                        temporal=links.enable_temporal_links,
                        causal=links.enable_causal_links,
                    ),
                    **options(policies.DATABASE),
                ),
            )
        planned = [p.seq for p in plan.planned]
        stored: UpsertBatchResult = await workflow.execute_activity_method(
            PipelineActivities.upsert_documents,
            UpsertBatch(job.bank_id, job.operation_id, job.source, planned),
            **options(policies.UPSERT),
        )
        await signal_released(stored.waiters)
        if (
            job.options.extraction_mode == "llm"
            and fact_ids
            and workflow.patched("llm-supersession")
        ):
            await self._supersede(job, fact_ids)
        failed += [DocumentFailure(f.seq, names[f.seq], f.message) for f in stored.failed]
        return BatchResult(stored.done, failed)

    async def _supersede(self, job: BatchJob, fact_ids: list[str]) -> None:
        """The `llm` path of supersession (docs/lifecycle.md), after the upsert: a model call
        cannot sit inside the upsert's transaction. The local rules already ran there, so a
        call that fails after its retries leaves their answer standing and the batch goes on
        (the facts are stored; nothing is lost)."""

        async def call(ids: list[str]) -> None:
            try:
                await workflow.execute_activity_method(
                    LifecycleActivities.supersede_facts,
                    StagedFacts(job.bank_id, job.operation_id, ids),
                    **options(policies.SUPERSEDE),
                )
            except ActivityError as exc:
                workflow.logger.warning(
                    "llm supersession of %d facts failed, the local rules stand: %s",
                    len(ids),
                    exc.cause or exc,
                )

        await self._each(fact_ids, policies.SUPERSEDE_BATCH, call)

    async def _extract(self, job: BatchJob, planned: list[PlannedDocument]) -> list[str]:
        size = policies.EXTRACT_BATCH
        if job.options.extraction_mode != "llm" and workflow.patched("local-extract-batch"):
            size = policies.LOCAL_EXTRACT_BATCH
        chars = policies.EXTRACT_CHARS if workflow.patched("extract-chars") else None
        calls = extraction_slices(planned, size, chars)
        staged = await asyncio.gather(
            *(
                workflow.execute_activity_method(
                    RetainActivities.extract_facts,
                    ExtractionJob(
                        job.bank_id,
                        job.operation_id,
                        job.options.extraction_mode,
                        slices,
                        job.options.retain_mission,
                    ),
                    **options(policies.EXTRACT),
                )
                for slices in calls
            )
        )
        return [fid for facts in staged for fid in facts.fact_ids]

    async def _each(
        self, fact_ids: list[str], size: int, call: Callable[[list[str]], Awaitable[object]]
    ) -> None:
        """`call` on the ids in batches of `size`, at most FACT_CALLS at a time: the commands
        one workflow task sends must stay under Temporal's 4 MB message limit (108 batches of
        1,024 ids at once, a 1,000,000-character text's, were 4.3 MB, and Temporal terminated
        the workflow)."""
        batches = [fact_ids[s : s + size] for s in range(0, len(fact_ids), size)]
        if not workflow.patched("fact-calls"):
            await asyncio.gather(*(call(batch) for batch in batches))
            return
        running = asyncio.Semaphore(policies.FACT_CALLS)

        async def bounded(batch: list[str]) -> object:
            async with running:
                return await call(batch)

        await asyncio.gather(*(bounded(batch) for batch in batches))

    async def _report(self, job: BatchJob, permille: int) -> None:
        """Progress inside a batch, for parents that show it (the import)."""
        parent = workflow.info().parent
        if parent is None or job.source != "import" or permille <= self._reported:
            return
        self._reported = permille
        await workflow.get_external_workflow_handle(parent.workflow_id).signal(
            BATCH_PROGRESS, BatchProgress([r.seq for r in job.documents], permille)
        )


BatchDone = Callable[[list[DocumentRef], BatchResult | ChildWorkflowError], Awaitable[None]]


async def run_batches(
    job_of: Callable[[list[DocumentRef]], BatchJob],
    refs: list[DocumentRef],
    total: int,
    on_done: BatchDone,
) -> None:
    """Run the refs through DocumentBatchWorkflow children, MAX_PARALLEL_BATCHES at once; each
    batch's result (or failure) goes to `on_done` as it arrives."""
    slots = asyncio.Semaphore(policies.MAX_PARALLEL_BATCHES)

    async def run_one(batch: list[DocumentRef]) -> None:
        job = job_of(batch)
        async with slots:
            try:
                result: BatchResult = await workflow.execute_child_workflow(
                    DocumentBatchWorkflow.run,
                    job,
                    id=batch_workflow_id(job.bank_id, job.operation_id, batch[0].seq),
                )
            except ChildWorkflowError as exc:
                await on_done(batch, exc)
                return
        await on_done(batch, result)

    if workflow.patched("larger-batches"):
        batches = batches_of(
            refs, total, policies.BATCH_LEAST, policies.BATCH_DOCUMENTS, policies.BATCH_RECORDS
        )
    else:
        batches = batches_of(refs, total, 0, 64, 256)  # as runs started before it were cut
    await asyncio.gather(*(run_one(batch) for batch in batches))
