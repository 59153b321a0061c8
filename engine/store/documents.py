"""Documents and their chunks: listing, reading, deleting."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from engine.db import Connection
from engine.errors import NotFound
from engine.retain.upsert import DELETE_ORPHAN_ENTITIES
from engine.store.document_history import record_event
from engine.store.locks import consolidation_lock


@dataclass(frozen=True)
class DocumentRow:
    document_id: str
    bank_id: str
    content: str
    content_hash: str
    context: str
    metadata: dict[str, Any]
    tags: list[str]
    mentioned_at: datetime | None
    created_at: datetime
    updated_at: datetime
    fact_count: int
    facts_by_type: dict[str, int]


@dataclass(frozen=True)
class ChunkRow:
    chunk_id: str
    document_id: str
    bank_id: str
    chunk_index: int
    content: str
    created_at: datetime


_DOC_COLUMNS = """
d.document_id, d.bank_id, d.content, d.content_hash, d.context, d.metadata, d.tags,
d.mentioned_at, d.created_at, d.updated_at,
(SELECT count(*) FROM memory_units m WHERE m.bank_id = d.bank_id
   AND m.document_id = d.document_id) AS fact_count,
coalesce((SELECT jsonb_object_agg(t.fact_type, t.n) FROM (
    SELECT fact_type, count(*) AS n FROM memory_units m WHERE m.bank_id = d.bank_id
      AND m.document_id = d.document_id GROUP BY fact_type) t), '{}'::jsonb) AS facts_by_type
"""


def _document(row: asyncpg.Record) -> DocumentRow:
    return DocumentRow(**dict(row))


async def list_documents(
    conn: Connection, bank_id: str, query: str | None, limit: int, offset: int
) -> tuple[list[DocumentRow], int]:
    pattern = f"%{query}%" if query else None
    rows = await conn.fetch(
        f"SELECT {_DOC_COLUMNS} FROM documents d WHERE d.bank_id = $1"
        " AND ($2::text IS NULL OR d.document_id ILIKE $2 OR d.content ILIKE $2)"
        " ORDER BY d.updated_at DESC, d.document_id LIMIT $3 OFFSET $4",
        bank_id,
        pattern,
        limit,
        offset,
    )
    total = await conn.fetchval(
        "SELECT count(*) FROM documents d WHERE d.bank_id = $1"
        " AND ($2::text IS NULL OR d.document_id ILIKE $2 OR d.content ILIKE $2)",
        bank_id,
        pattern,
    )
    return [_document(r) for r in rows], int(total)


async def get_document(conn: Connection, bank_id: str, document_id: str) -> DocumentRow:
    row = await conn.fetchrow(
        f"SELECT {_DOC_COLUMNS} FROM documents d WHERE d.bank_id = $1 AND d.document_id = $2",
        bank_id,
        document_id,
    )
    if row is None:
        raise NotFound("document", document_id)
    return _document(row)


async def document_spans(conn: Connection, bank_id: str, document_id: str) -> list[Any]:
    """The items the document was retained as, without their text (documents.items)."""
    spans: list[Any] = await conn.fetchval(
        "SELECT items FROM documents WHERE bank_id = $1 AND document_id = $2",
        bank_id,
        document_id,
    )
    return spans or []


async def list_chunks(
    conn: Connection, bank_id: str, document_id: str, limit: int, offset: int
) -> tuple[list[ChunkRow], int]:
    await get_document(conn, bank_id, document_id)
    rows = await conn.fetch(
        "SELECT chunk_id, document_id, bank_id, chunk_index, content, created_at FROM chunks"
        " WHERE bank_id = $1 AND document_id = $2 ORDER BY char_start NULLS LAST, chunk_index,"
        " chunk_id LIMIT $3 OFFSET $4",
        bank_id,
        document_id,
        limit,
        offset,
    )
    total = await conn.fetchval(
        "SELECT count(*) FROM chunks WHERE bank_id = $1 AND document_id = $2", bank_id, document_id
    )
    return [ChunkRow(**dict(r)) for r in rows], int(total)


async def get_chunk(conn: Connection, chunk_id: str, bank_ids: list[str] | None = None) -> ChunkRow:
    """The chunk by id, looked for only in `bank_ids` when given (the caller's banks)."""
    row = await conn.fetchrow(
        "SELECT chunk_id, document_id, bank_id, chunk_index, content, created_at FROM chunks"
        " WHERE chunk_id = $1 AND ($2::text[] IS NULL OR bank_id = ANY($2::text[]))"
        " ORDER BY bank_id LIMIT 1",
        chunk_id,
        bank_ids,
    )
    if row is None:
        raise NotFound("chunk", chunk_id)
    return ChunkRow(**dict(row))


async def delete_document(conn: Connection, bank_id: str, document_id: str) -> int:
    """Remove the document with its chunks, facts, links and now-orphaned entities;
    returns the number of facts removed."""
    async with conn.transaction():
        await conn.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended($1 || E'\\x1f' || $2, 0))",
            bank_id,
            document_id,
        )
        await consolidation_lock(conn, bank_id)
        entity_ids = [
            r["entity_id"]
            for r in await conn.fetch(
                "SELECT DISTINCT ue.entity_id FROM unit_entities ue"
                " JOIN memory_units m ON m.id = ue.unit_id"
                " WHERE m.bank_id = $1 AND m.document_id = $2",
                bank_id,
                document_id,
            )
        ]
        facts = await conn.fetchval(
            "SELECT count(*) FROM memory_units WHERE bank_id = $1 AND document_id = $2",
            bank_id,
            document_id,
        )
        deleted = await conn.fetchval(
            "DELETE FROM documents WHERE bank_id = $1 AND document_id = $2 RETURNING 1",
            bank_id,
            document_id,
        )
        if deleted is None:
            raise NotFound("document", document_id)
        await record_event(conn, bank_id, "fact_deleted", None, {document_id: int(facts)})
        await conn.execute(
            "UPDATE entities e SET mention_count ="
            " (SELECT count(*) FROM unit_entities ue WHERE ue.entity_id = e.id)"
            " WHERE e.id = ANY($1::uuid[])",
            entity_ids,
        )
        await conn.execute(DELETE_ORPHAN_ENTITIES, bank_id, entity_ids)
    return int(facts)


_SET_TAGS = """
WITH doc AS (
  UPDATE documents SET tags = $3, updated_at = now()
  WHERE bank_id = $1 AND document_id = $2
  RETURNING 1
), facts AS (
  UPDATE memory_units SET tags = $3, updated_at = now()
  WHERE bank_id = $1 AND document_id = $2 AND fact_type <> 'observation' AND tags <> $3
  RETURNING 1
)
SELECT (SELECT count(*) FROM doc) AS documents, (SELECT count(*) FROM facts) AS facts
"""


async def set_document_tags(
    conn: Connection, bank_id: str, document_id: str, tags: list[str]
) -> int:
    """New tags for a document and the facts extracted from it (under the document's lock,
    so a retain of it in flight does not interleave); returns the facts changed."""
    async with conn.transaction():
        await conn.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended($1 || E'\\x1f' || $2, 0))",
            bank_id,
            document_id,
        )
        row = await conn.fetchrow(_SET_TAGS, bank_id, document_id, tags)
        assert row is not None
        if row["documents"] == 0:
            raise NotFound("document", document_id)
        await record_event(conn, bank_id, "retag", None, {document_id: 0})
    return int(row["facts"])
