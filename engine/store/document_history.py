"""A document's history: every write that stored it (retain, append, reprocess), recorded
in the upsert's transaction with the content hash it left and what it changed, and every
other change to it or its facts (Hindsight's DocumentEvent kinds: a fact edited,
invalidated, restored or deleted, a retag, a consolidation that used its facts, a clear of
the observations built from them), recorded in the transaction of that change."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from engine.db import Connection
from engine.errors import NotFound
from engine.retain.payloads import UpdateMode, UpsertResult

WriteKind = Literal["retain", "append", "reprocess"]
KIND_OF_MODE: dict[UpdateMode, WriteKind] = {
    "replace": "retain",
    "append": "append",
    "reprocess": "reprocess",
}

EventKind = Literal[
    "retag",
    "fact_edited",
    "fact_invalidated",
    "fact_restored",
    "fact_deleted",
    "observations_cleared",
    "consolidation",
]
DocumentEventKind = Literal[WriteKind, EventKind]  # every kind a document's history holds


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
    fact_id: str | None = None
    observations_created: tuple[str, ...] = ()
    observations_updated: tuple[str, ...] = ()
    observations_removed: tuple[str, ...] = ()


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


# One event per document touched; the content hash is the document's at the time (empty
# once it is deleted).
_EVENT = """
INSERT INTO document_versions (bank_id, document_id, kind, operation_id, content_hash,
                               fact_id, facts_removed, observations_removed)
SELECT $1, v.document_id, $2, $3, coalesce(d.content_hash, ''), $4::uuid, v.removed, $5::uuid[]
FROM unnest($6::text[], $7::int[]) AS v(document_id, removed)
LEFT JOIN documents d ON d.bank_id = $1 AND d.document_id = v.document_id
"""


async def record_event(
    conn: Connection,
    bank_id: str,
    kind: EventKind,
    operation_id: str | None,
    removed_by_document: dict[str, int],
    *,
    fact_id: str | None = None,
    observations_removed: Sequence[str] = (),
) -> None:
    """One `kind` event for each document in `removed_by_document` (document id -> facts it
    lost to the change). A change made outside an operation has no operation id ('')."""
    if not removed_by_document:
        return
    documents = sorted(removed_by_document)
    await conn.execute(
        _EVENT,
        bank_id,
        kind,
        operation_id or "",
        fact_id,
        list(observations_removed),
        documents,
        [removed_by_document[d] for d in documents],
    )


# The observations that cite the consolidated facts, per document: created by this
# transaction (their row's created_at is the transaction's now()) or updated by it.
_CONSOLIDATION = """
INSERT INTO document_versions (bank_id, document_id, kind, operation_id, content_hash,
                               observations_created, observations_updated)
SELECT $1, f.document_id, 'consolidation', $2, coalesce(d.content_hash, ''),
       coalesce(array_agg(DISTINCT o.id) FILTER (WHERE o.created_at = now()), '{}'),
       coalesce(array_agg(DISTINCT o.id) FILTER (WHERE o.created_at <> now()), '{}')
FROM memory_units f
JOIN observation_evidence e ON e.fact_id = f.id
JOIN memory_units o ON o.id = e.observation_id
LEFT JOIN documents d ON d.bank_id = $1 AND d.document_id = f.document_id
WHERE f.bank_id = $1 AND f.id = ANY($3::uuid[]) AND f.document_id IS NOT NULL
GROUP BY f.document_id, d.content_hash
"""


async def record_consolidation(
    conn: Connection, bank_id: str, operation_id: str, fact_ids: Sequence[str]
) -> None:
    """A consolidation event for each document whose facts this batch consolidated into an
    observation."""
    if fact_ids:
        await conn.execute(_CONSOLIDATION, bank_id, operation_id, list(fact_ids))


# Run before the observations go (their evidence goes with them): per document, the
# observations about to be cleared that its facts supported ($3 NULL: all of the bank's).
_CLEARED = """
INSERT INTO document_versions (bank_id, document_id, kind, operation_id, content_hash,
                               observations_removed)
SELECT $1, f.document_id, 'observations_cleared', $2, coalesce(d.content_hash, ''),
       array_agg(DISTINCT e.observation_id)
FROM observation_evidence e
JOIN memory_units f ON f.id = e.fact_id
LEFT JOIN documents d ON d.bank_id = $1 AND d.document_id = f.document_id
WHERE e.bank_id = $1 AND ($3::uuid[] IS NULL OR e.observation_id = ANY($3::uuid[]))
  AND f.document_id IS NOT NULL
GROUP BY f.document_id, d.content_hash
"""


async def record_observations_cleared(
    conn: Connection, bank_id: str, observation_ids: Sequence[str] | None
) -> None:
    """An observations_cleared event for each document whose facts supported one of the
    observations about to be cleared (None: every observation of the bank). Call it in the
    clearing transaction, before the delete."""
    if observation_ids is not None and not observation_ids:
        return
    ids = None if observation_ids is None else [str(o) for o in observation_ids]
    await conn.execute(_CLEARED, bank_id, "", ids)


_LIST = """
SELECT document_id, kind, operation_id, content_hash, items_count, facts_added, facts_removed,
       chunks_added, chunks_removed, created_at, fact_id::text,
       observations_created::text[], observations_updated::text[],
       observations_removed::text[]
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
    return [
        DocumentVersion(
            **{
                **dict(row),
                "observations_created": tuple(row["observations_created"]),
                "observations_updated": tuple(row["observations_updated"]),
                "observations_removed": tuple(row["observations_removed"]),
            }
        )
        for row in rows
    ], int(total or 0)
