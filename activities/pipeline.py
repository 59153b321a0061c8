"""The document pipeline's bookkeeping activities: list, claim, plan, upsert, end.

Each takes ids and small parameters, loads what it needs from staging and calls one engine
function (engine/retain/pipeline.py, claims.py, documents.py); engine errors become Temporal
failures in activities/failures.py.
"""

from __future__ import annotations

from temporalio import activity

from engine.db import Pool, patient
from engine.retain.claims import claim_documents, release_operation
from engine.retain.documents import (
    discard_operation,
    list_documents,
    operation_totals,
    sweep_staging,
)
from engine.retain.payloads import (
    ClaimRequest,
    ClaimResult,
    DocumentPage,
    DocumentRef,
    OperationEnd,
    PlanRequest,
    PlanResult,
    UpsertBatch,
    UpsertBatchResult,
)
from engine.retain.pipeline import plan_batch, upsert_batch
from engine.store.operations import update_operation
from workflows.policies import UPSERT


class PipelineActivities:
    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    @activity.defn
    async def list_documents(self, page: DocumentPage) -> list[DocumentRef]:
        async with self._pool.acquire() as conn:
            rows = await list_documents(
                conn, page.source, page.operation_id, page.after_seq, page.limit
            )
        return [DocumentRef(seq, document_id, records) for seq, document_id, records in rows]

    @activity.defn
    async def claim_documents(self, request: ClaimRequest) -> ClaimResult:
        async with self._pool.acquire() as conn:
            claimed, busy = await claim_documents(
                conn,
                request.bank_id,
                request.operation_id,
                request.workflow_id,
                request.document_ids,
            )
        return ClaimResult(claimed, busy)

    @activity.defn
    async def plan_documents(self, request: PlanRequest) -> PlanResult:
        async with self._pool.acquire() as conn:
            return await plan_batch(conn, request)

    @activity.defn
    async def upsert_documents(self, job: UpsertBatch) -> UpsertBatchResult:
        async with self._pool.acquire() as conn:
            # Its statements grow with the batch's facts; the activity's own timeout (and
            # heartbeat) bound it.
            return await upsert_batch(patient(conn, UPSERT.start_to_close.total_seconds()), job)

    @activity.defn
    async def end_operation(self, end: OperationEnd) -> list[str]:
        """Record the outcome, release the operation's documents and discard its staging (a
        failed or cancelled one keeps its input for a retry), in one transaction; returns the
        workflows waiting for the released documents."""
        async with self._pool.acquire() as conn, conn.transaction():
            result = dict(end.result) if end.result is not None else None
            if end.result_from_documents:
                result = await operation_totals(conn, end.operation_id)
            await update_operation(
                conn, end.operation_id, end.status, dict(end.progress), result, end.error
            )
            waiters = await release_operation(conn, end.operation_id)
            await discard_operation(conn, end.operation_id, keep_input=end.status != "completed")
            await sweep_staging(conn)
        return waiters
