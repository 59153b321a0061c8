"""The pipeline's per-batch steps over staged documents: plan, and upsert with release.

A batch is several documents of one operation (engine/retain/documents.py stages them); the
steps in between (extract, embed, resolve, link) work on chunks and facts and do not care
which document they came from. One document's failure to plan or store is reported for that
document, so the others go on.
"""

from __future__ import annotations

from engine.db import Connection
from engine.errors import InvalidInput
from engine.retain.claims import holds_claim, release_document
from engine.retain.documents import load_documents, load_plan, save_plan, save_result
from engine.retain.payloads import (
    DocumentFailure,
    DocumentInput,
    DocumentOutcome,
    PlannedDocument,
    PlanRequest,
    PlanResult,
    UpsertBatch,
    UpsertBatchResult,
    UpsertDocument,
)
from engine.retain.plan import plan_documents
from engine.retain.upsert import upsert_document


async def plan_batch(conn: Connection, request: PlanRequest) -> PlanResult:
    """Plan each document and stage its plan; returns how many chunks each must extract."""
    documents = await load_documents(conn, request.source, request.operation_id, request.seqs)
    planned: list[PlannedDocument] = []
    failed: list[DocumentFailure] = []
    for seq in request.seqs:
        document = documents[seq]
        if isinstance(document, InvalidInput):
            failed.append(DocumentFailure(seq, "", str(document)))
            continue
        [plan] = (
            await plan_documents(
                conn, request.bank_id, request.operation_id, [document], request.chunk_size
            )
        ).documents
        chunks = await save_plan(conn, request.operation_id, seq, request.bank_id, plan)
        planned.append(PlannedDocument(seq, chunks))
    return PlanResult(planned, failed)


async def upsert_batch(conn: Connection, job: UpsertBatch) -> UpsertBatchResult:
    """Store each document in its own transaction, which also records its result and releases
    its claim: a retried call returns the recorded results and stores nothing twice, and never
    writes over a later write that took the document after the release."""
    documents = await load_documents(conn, job.source, job.operation_id, job.seqs)
    done: list[DocumentOutcome] = []
    failed: list[DocumentFailure] = []
    waiters: set[str] = set()
    for seq in job.seqs:
        document = documents[seq]
        if isinstance(document, InvalidInput):
            failed.append(DocumentFailure(seq, "", str(document)))
            continue
        outcome = await _upsert_one(conn, job, seq, document, waiters)
        if isinstance(outcome, DocumentFailure):
            failed.append(outcome)
        else:
            done.append(outcome)
    return UpsertBatchResult(done, failed, sorted(waiters))


async def _upsert_one(
    conn: Connection, job: UpsertBatch, seq: int, document: DocumentInput, waiters: set[str]
) -> DocumentOutcome | DocumentFailure:
    async with conn.transaction():
        plan, recorded = await load_plan(conn, job.operation_id, seq)
        if recorded is not None:
            return DocumentOutcome(seq, recorded)
        if not await holds_claim(conn, job.bank_id, plan.document_id, job.operation_id):
            return DocumentFailure(
                seq, plan.document_id, "another write took this document over; send it again"
            )
        try:
            result = await upsert_document(
                conn,
                UpsertDocument(
                    job.bank_id, job.operation_id, plan, document.items, document.update_mode
                ),
            )
        except InvalidInput as exc:
            return DocumentFailure(seq, plan.document_id, str(exc))
        await save_result(conn, job.operation_id, seq, result)
        waiters.update(
            await release_document(conn, job.bank_id, plan.document_id, job.operation_id)
        )
    return DocumentOutcome(seq, result)
