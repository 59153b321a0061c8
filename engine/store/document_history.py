"""A document's versions: every write that stored it (retain, append, reprocess), recorded
in the upsert's transaction with the content hash it left and what it changed."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from engine.db import Connection
from engine.errors import NotFound
from engine.retain.payloads import UpdateMode, UpsertResult

KIND_OF_MODE: dict[str, str] = {"replace": "retain", "append": "append", "reprocess": "reprocess"}


@dataclass(frozen=True)
class DocumentVersion:
    document_id: str
    kind: str
    operation_id: str
    content_hash: str
    items_count: int
    facts_added: int
    facts_removed: int
    chunks_added: int
    chunks_removed: int
    created_at: datetime


# The content hash is read from the document the same transaction just wrote.
_RECORD = """
INSERT INTO document_versions (bank_id, document_id, kind, operation_id, content_hash,
                               items_count, facts_added, facts_removed, chunks_added,
                               chunks_removed)
SELECT $1, v.document_id, v.kind, $2, coalesce(d.content_hash, ''), v.items, v.added,
       v.removed, v.chunks_added, v.chunks_removed
FROM unnest($3::text[], $4::text[], $5::int[], $6::int[], $7::int[], $8::int[], $9::int[])
     AS v(document_id, kind, items, added, removed, chunks_added, chunks_removed)
LEFT JOIN documents d ON d.bank_id = $1 AND d.document_id = v.document_id
"""


async def record_versions(
    conn: Connection,
    bank_id: str,
    operation_id: str,
    stored: list[tuple[UpdateMode, int, UpsertResult]],
) -> None:
    """One version per stored document: (its update mode, its items, its upsert result)."""
    if not stored:
        return
    await conn.execute(
        _RECORD,
        bank_id,
        operation_id,
        [r.document_id for _, _, r in stored],
        [KIND_OF_MODE[mode] for mode, _, _ in stored],
        [items for _, items, _ in stored],
        [r.facts_added for _, _, r in stored],
        [r.facts_removed for _, _, r in stored],
        [r.chunks_added for _, _, r in stored],
        [r.chunks_removed for _, _, r in stored],
    )


_LIST = """
SELECT document_id, kind, operation_id, content_hash, items_count, facts_added, facts_removed,
       chunks_added, chunks_removed, created_at
FROM document_versions WHERE bank_id = $1 AND document_id = $2
ORDER BY id DESC LIMIT $3 OFFSET $4
"""


async def document_history(
    conn: Connection, bank_id: str, document_id: str, limit: int, offset: int
) -> tuple[list[DocumentVersion], int]:
    """The document's versions, newest first, and how many there are. A document with
    neither a version nor a row is NotFound."""
    total = await conn.fetchval(
        "SELECT count(*) FROM document_versions WHERE bank_id = $1 AND document_id = $2",
        bank_id,
        document_id,
    )
    if not total:
        exists = await conn.fetchval(
            "SELECT 1 FROM documents WHERE bank_id = $1 AND document_id = $2", bank_id, document_id
        )
        if exists is None:
            raise NotFound("document", document_id)
    rows = await conn.fetch(_LIST, bank_id, document_id, limit, offset)
    return [DocumentVersion(**dict(row)) for row in rows], int(total or 0)
