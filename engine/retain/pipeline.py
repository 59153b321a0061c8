"""The pipeline's per-batch steps over staged documents: plan, and upsert with release.

A batch is several documents of one operation (engine/retain/documents.py stages them); the
steps in between (extract, embed, resolve, link) work on chunks and facts and do not care
which document they came from. One document's failure to plan or store is reported for that
document, so the others go on.
"""

from __future__ import annotations

from engine.db import Connection
from engine.errors import InvalidInput
from engine.retain.claims import held_claims, lock_claims, release_documents
from engine.retain.documents import load_documents, load_plans, save_plans, save_results
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
from engine.retain.upsert import upsert_documents
from engine.store.document_history import record_versions


async def plan_batch(conn: Connection, request: PlanRequest) -> PlanResult:
    """Plan the documents and stage their plans; returns how many chunks each must extract."""
    documents = await load_documents(conn, request.source, request.operation_id, request.seqs)
    failed: list[DocumentFailure] = []
    valid: list[tuple[int, DocumentInput]] = []
    for seq in request.seqs:
        document = documents[seq]
        if isinstance(document, InvalidInput):
            failed.append(DocumentFailure(seq, "", str(document)))
        else:
            valid.append((seq, document))
    plan = await plan_documents(
        conn,
        request.bank_id,
        request.operation_id,
        [document for _, document in valid],
        request.chunk_size,
    )
    plans = [(seq, p) for (seq, _), p in zip(valid, plan.documents, strict=True)]
    chunks = await save_plans(conn, request.operation_id, request.bank_id, plans)
    return PlanResult([PlannedDocument(seq, *chunks[seq]) for seq, _ in plans], failed)


async def upsert_batch(conn: Connection, job: UpsertBatch) -> UpsertBatchResult:
    """Store the batch's documents in one transaction, which also records each document's
    result and releases its claim: a retried call returns the recorded results and stores
    nothing twice, and never writes over a later write that took a document after the
    release."""
    documents = await load_documents(conn, job.source, job.operation_id, job.seqs)
    done: list[DocumentOutcome] = []
    failed: list[DocumentFailure] = []
    async with conn.transaction():
        plans = await load_plans(conn, job.operation_id, job.seqs)
        names = [plans[seq][0].document_id for seq in job.seqs]
        # Claim locks first, as everywhere (engine/retain/claims.py): an operation ending now
        # releases these documents after this transaction, never in the middle of it.
        await lock_claims(conn, job.bank_id, names)
        held = await held_claims(conn, job.bank_id, job.operation_id, names)
        pending: list[tuple[int, UpsertDocument]] = []
        for seq in job.seqs:
            document = documents[seq]
            plan, recorded = plans[seq]
            if isinstance(document, InvalidInput):
                failed.append(DocumentFailure(seq, plan.document_id, str(document)))
            elif recorded is not None:
                done.append(DocumentOutcome(seq, recorded))
            elif plan.document_id not in held:
                message = "another write took this document over; send it again"
                failed.append(DocumentFailure(seq, plan.document_id, message))
            else:
                upsert = UpsertDocument(
                    job.bank_id, job.operation_id, plan, document.items, document.update_mode
                )
                pending.append((seq, upsert))
        results = await upsert_documents(conn, [upsert for _, upsert in pending])
        stored = [(seq, result) for (seq, _), result in zip(pending, results, strict=True)]
        await save_results(conn, job.operation_id, stored)
        modes = dict(pending)
        await record_versions(
            conn,
            job.bank_id,
            job.operation_id,
            [(modes[seq].update_mode, len(modes[seq].items), result) for seq, result in stored],
        )
        done += [DocumentOutcome(seq, result) for seq, result in stored]
        released = [upsert.plan.document_id for _, upsert in pending]
        waiters = await release_documents(conn, job.bank_id, job.operation_id, released)
    return UpsertBatchResult(sorted(done, key=lambda d: d.seq), failed, sorted(set(waiters)))
