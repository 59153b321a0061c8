"""Step 1: chunk each document and decide which chunks are new, kept or dropped."""

from __future__ import annotations

import hashlib

from engine.chunking import chunk_content
from engine.db import Connection
from engine.retain.payloads import ChunkJob, DocumentInput, DocumentPlan, RetainItem, RetainPlan


def chunk_fingerprint(text: str, item: RetainItem) -> str:
    """What makes a chunk's facts what they are: its text and the item it came from (the
    timestamp resolves its relative dates). Equal fingerprints mean nothing to re-extract."""
    stamp = item.timestamp.isoformat() if item.timestamp else "unset"
    raw = "\x1f".join([text, stamp, item.context, *sorted(item.tags)])
    return hashlib.sha256(raw.encode()).hexdigest()


def chunk_jobs(bank_id: str, document: DocumentInput, chunk_size: int) -> list[ChunkJob]:
    """All chunks of a document, with ids unique within it."""
    jobs: list[ChunkJob] = []
    seen: dict[str, int] = {}
    for item in document.items:
        for chunk in chunk_content(document.document_id, item.content, chunk_size):
            count = seen.get(chunk.chunk_id, 0) + 1
            seen[chunk.chunk_id] = count
            chunk_id = chunk.chunk_id if count == 1 else f"{chunk.chunk_id}~{count}"
            jobs.append(
                ChunkJob(
                    bank_id=bank_id,
                    document_id=document.document_id,
                    chunk_id=chunk_id,
                    text=chunk.text,
                    mentioned_at=item.timestamp,
                    context=item.context,
                    speaker=chunk.speaker,
                    metadata=dict(item.metadata),
                    tags=list(item.tags),
                    entity_hints=list(item.entities),
                    content_hash=chunk_fingerprint(chunk.text, item),
                    char_start=chunk.char_start,
                    char_end=chunk.char_end,
                )
            )
    return jobs


_EXISTING = """
SELECT document_id, chunk_id, content_hash FROM chunks
WHERE bank_id = $1 AND document_id = ANY($2::text[])
"""


async def plan_documents(
    conn: Connection,
    bank_id: str,
    operation_id: str,
    documents: list[DocumentInput],
    chunk_size: int,
) -> RetainPlan:
    plans: list[DocumentPlan] = []
    stored: dict[str, dict[str, str]] = {}
    for row in await conn.fetch(_EXISTING, bank_id, [d.document_id for d in documents]):
        stored.setdefault(row["document_id"], {})[row["chunk_id"]] = row["content_hash"]
    for document in documents:
        jobs = chunk_jobs(bank_id, document, chunk_size)
        existing = stored.get(document.document_id, {})
        if document.update_mode == "reprocess":
            # Everything again, with today's options: the stored chunks and their facts go.
            plans.append(DocumentPlan(document.document_id, jobs, [], sorted(existing)))
            continue
        new = [job for job in jobs if existing.get(job.chunk_id) != job.content_hash]
        kept = [job.chunk_id for job in jobs if existing.get(job.chunk_id) == job.content_hash]
        new_ids = {job.chunk_id for job in new}
        if document.update_mode == "replace":
            wanted = {job.chunk_id for job in jobs}
            dropped = [cid for cid in existing if cid not in wanted or cid in new_ids]
        else:
            dropped = [cid for cid in existing if cid in new_ids]
            kept += [cid for cid in existing if cid not in new_ids and cid not in kept]
        plans.append(DocumentPlan(document.document_id, new, sorted(kept), sorted(dropped)))
    return RetainPlan(bank_id, operation_id, plans)
