"""RetainWorkflow (one per request) and DocumentRetainWorkflow (one per document at a time).

A child workflow's id names its document, so two retains of the same document never run at
once: the second waits until the first has finished, then applies its own version.
"""

from __future__ import annotations

import asyncio

from temporalio import workflow
from temporalio.exceptions import ActivityError, ChildWorkflowError, WorkflowAlreadyStartedError

with workflow.unsafe.imports_passed_through():
    from activities.retain import RetainActivities
    from engine.retain.payloads import (
        DocumentBatch,
        ExtractionBatch,
        LinkOptions,
        OperationUpdate,
        RetainPlan,
        RetainRequest,
        RetainResult,
        StagedFacts,
        UpsertDocument,
        UpsertResult,
    )
    from workflows import policies

from workflows.consolidation import SETTLE_AFTER_RETAIN, request_consolidation
from workflows.errors import error_message
from workflows.webhooks import notify


def document_workflow_id(bank_id: str, document_id: str) -> str:
    return f"retain-doc:{bank_id}:{document_id}"


def split_batches(request: RetainRequest) -> list[DocumentBatch]:
    """One child per explicit document id; derived ids are grouped, nobody else writes them."""
    batches: list[DocumentBatch] = []
    implicit = [d for d in request.documents if not d.explicit_id]
    for document in request.documents:
        if document.explicit_id:
            batches.append(
                DocumentBatch(request.bank_id, request.operation_id, [document], request.options)
            )
    size = policies.IMPLICIT_DOCUMENTS_PER_CHILD
    for start in range(0, len(implicit), size):
        batches.append(
            DocumentBatch(
                request.bank_id,
                request.operation_id,
                implicit[start : start + size],
                request.options,
            )
        )
    return batches


def child_id(batch: DocumentBatch, index: int) -> str:
    if len(batch.documents) == 1 and batch.documents[0].explicit_id:
        return document_workflow_id(batch.bank_id, batch.documents[0].document_id)
    return f"retain-batch:{batch.bank_id}:{batch.operation_id}:{index}"


def total(operation_id: str, results: list[RetainResult]) -> RetainResult:
    return RetainResult(
        operation_id=operation_id,
        documents=sum(r.documents for r in results),
        facts_added=sum(r.facts_added for r in results),
        facts_removed=sum(r.facts_removed for r in results),
        chunks_added=sum(r.chunks_added for r in results),
        chunks_removed=sum(r.chunks_removed for r in results),
        links_added=sum(r.links_added for r in results),
        document_ids=[d for r in results for d in r.document_ids],
    )


@workflow.defn
class RetainWorkflow:
    def __init__(self) -> None:
        self._documents_total = 0
        self._documents_done = 0
        self._facts = 0

    @workflow.query
    def progress(self) -> dict[str, int]:
        return {
            "documents_total": self._documents_total,
            "documents_done": self._documents_done,
            "facts_added": self._facts,
        }

    @workflow.run
    async def run(self, request: RetainRequest) -> RetainResult:
        self._documents_total = len(request.documents)
        await self._update(OperationUpdate(request.operation_id, "running", self.progress()))
        try:
            results = await self._run_children(request)
        except asyncio.CancelledError:
            await self._update(
                OperationUpdate(
                    request.operation_id, "cancelled", self.progress(), None, "cancelled"
                )
            )
            raise
        except (ActivityError, ChildWorkflowError) as exc:
            await self._update(
                OperationUpdate(
                    request.operation_id, "failed", self.progress(), None, error_message(exc)
                )
            )
            if workflow.patched("webhooks-after-retain"):
                await notify(
                    request.bank_id,
                    f"retain:{request.operation_id}",
                    "retain.failed",
                    {"operation_id": request.operation_id, "error": error_message(exc)},
                )
            raise
        result = total(request.operation_id, results)
        await self._update(
            OperationUpdate(
                request.operation_id,
                "completed",
                self.progress(),
                {
                    "documents": result.documents,
                    "facts_added": result.facts_added,
                    "facts_removed": result.facts_removed,
                    "chunks_added": result.chunks_added,
                    "chunks_removed": result.chunks_removed,
                    "links_added": result.links_added,
                    "document_ids": result.document_ids,
                },
            )
        )
        if workflow.patched("webhooks-after-retain"):
            await notify(
                request.bank_id,
                f"retain:{request.operation_id}",
                "retain.completed",
                {
                    "operation_id": request.operation_id,
                    "documents": result.documents,
                    "document_ids": result.document_ids,
                    "facts_added": result.facts_added,
                    "facts_removed": result.facts_removed,
                },
            )
        changed = result.facts_added > 0 or result.facts_removed > 0
        if workflow.patched("consolidate-after-retain") and changed:
            await self._consolidate(request)
        return result

    async def _consolidate(self, request: RetainRequest) -> None:
        """Turn the new facts into observations: the bank's consolidation runs on its own
        (it outlives this workflow); a failure to request it leaves them to the schedule."""
        if request.options.enable_observations:
            await request_consolidation(request.bank_id, "retain", SETTLE_AFTER_RETAIN)

    async def _run_children(self, request: RetainRequest) -> list[RetainResult]:
        batches = split_batches(request)
        slots = asyncio.Semaphore(policies.MAX_PARALLEL_CHILDREN)

        async def run_one(index: int, batch: DocumentBatch) -> RetainResult:
            async with slots:
                result = await self._run_child(batch, child_id(batch, index))
            self._documents_done += result.documents
            self._facts += result.facts_added
            await self._update(OperationUpdate(request.operation_id, "running", self.progress()))
            return result

        return list(await asyncio.gather(*(run_one(i, b) for i, b in enumerate(batches))))

    async def _run_child(self, batch: DocumentBatch, workflow_id: str) -> RetainResult:
        while True:
            try:
                return await workflow.execute_child_workflow(
                    DocumentRetainWorkflow.run, batch, id=workflow_id
                )
            except WorkflowAlreadyStartedError:
                # Another retain is writing this document: wait for it, then apply ours.
                await workflow.sleep(policies.DOCUMENT_BUSY_WAIT)

    async def _update(self, update: OperationUpdate) -> None:
        await workflow.execute_activity_method(
            RetainActivities.update_operation,
            update,
            start_to_close_timeout=policies.BOOKKEEPING.start_to_close,
            retry_policy=policies.BOOKKEEPING.retry,
            heartbeat_timeout=policies.BOOKKEEPING.heartbeat,
        )


@workflow.defn
class DocumentRetainWorkflow:
    @workflow.run
    async def run(self, batch: DocumentBatch) -> RetainResult:
        plan: RetainPlan = await workflow.execute_activity_method(
            RetainActivities.plan_retain,
            batch,
            start_to_close_timeout=policies.DATABASE.start_to_close,
            retry_policy=policies.DATABASE.retry,
            heartbeat_timeout=policies.DATABASE.heartbeat,
        )
        chunks = [chunk for doc in plan.documents for chunk in doc.new_chunks]
        size = policies.EXTRACT_BATCH
        extracted = await asyncio.gather(
            *(
                workflow.execute_activity_method(
                    RetainActivities.extract_facts,
                    ExtractionBatch(
                        batch.operation_id,
                        batch.options.extraction_mode,
                        chunks[start : start + size],
                        batch.options.retain_mission,
                    ),
                    start_to_close_timeout=policies.EXTRACT.start_to_close,
                    retry_policy=policies.EXTRACT.retry,
                    heartbeat_timeout=policies.EXTRACT.heartbeat,
                )
                for start in range(0, len(chunks), size)
            )
        )
        fact_ids = [fid for staged in extracted for fid in staged.fact_ids]
        await self._in_batches(fact_ids, batch, policies.EMBED_BATCH, "embed")
        if fact_ids:
            await workflow.execute_activity_method(
                RetainActivities.resolve_entities,
                StagedFacts(batch.bank_id, batch.operation_id, fact_ids),
                start_to_close_timeout=policies.DATABASE.start_to_close,
                retry_policy=policies.DATABASE.retry,
                heartbeat_timeout=policies.DATABASE.heartbeat,
            )
        await self._in_batches(fact_ids, batch, policies.LINK_BATCH, "link")
        items = {doc.document_id: doc for doc in batch.documents}
        results: list[UpsertResult] = []
        for doc_plan in plan.documents:
            document = items[doc_plan.document_id]
            results.append(
                await workflow.execute_activity_method(
                    RetainActivities.upsert_document,
                    UpsertDocument(
                        batch.bank_id,
                        batch.operation_id,
                        doc_plan,
                        document.items,
                        document.update_mode,
                    ),
                    start_to_close_timeout=policies.DATABASE.start_to_close,
                    retry_policy=policies.DATABASE.retry,
                    heartbeat_timeout=policies.DATABASE.heartbeat,
                )
            )
        return RetainResult(
            operation_id=batch.operation_id,
            documents=len(results),
            facts_added=sum(r.facts_added for r in results),
            facts_removed=sum(r.facts_removed for r in results),
            chunks_added=sum(r.chunks_added for r in results),
            chunks_removed=sum(r.chunks_removed for r in results),
            links_added=sum(r.links_added for r in results),
            document_ids=[r.document_id for r in results],
        )

    async def _in_batches(
        self, fact_ids: list[str], batch: DocumentBatch, size: int, step: str
    ) -> None:
        options = batch.options
        calls = []
        for start in range(0, len(fact_ids), size):
            ids = fact_ids[start : start + size]
            if step == "embed":
                calls.append(
                    workflow.execute_activity_method(
                        RetainActivities.embed_facts,
                        StagedFacts(batch.bank_id, batch.operation_id, ids),
                        start_to_close_timeout=policies.EMBED.start_to_close,
                        retry_policy=policies.EMBED.retry,
                        heartbeat_timeout=policies.EMBED.heartbeat,
                    )
                )
            else:
                calls.append(
                    workflow.execute_activity_method(
                        RetainActivities.link_facts,
                        LinkOptions(
                            batch.bank_id,
                            batch.operation_id,
                            ids,
                            entity=options.enable_entity_links,
                            semantic=options.enable_semantic_links,
                            temporal=options.enable_temporal_links,
                            causal=options.enable_causal_links,
                        ),
                        start_to_close_timeout=policies.DATABASE.start_to_close,
                        retry_policy=policies.DATABASE.retry,
                        heartbeat_timeout=policies.DATABASE.heartbeat,
                    )
                )
        await asyncio.gather(*calls)
