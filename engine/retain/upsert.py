"""Step 6: move a document's staged facts into memory in one transaction.

Re-running it is harmless: chunks and facts carry deterministic ids (`ON CONFLICT DO
NOTHING`), staged rows are cleared only in the transaction that stored them, and a
transaction-level advisory lock on (bank, document) keeps two upserts of one document from
interleaving even outside Temporal's per-document workflow ids.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any

import asyncpg

from engine.db import Connection
from engine.retain.payloads import UpsertDocument, UpsertResult
from engine.text import term_frequencies

_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended($1 || E'\\x1f' || $2, 0))"

_DOCUMENT = """
INSERT INTO documents (bank_id, document_id, content, content_hash, context, metadata, tags,
                       mentioned_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT (bank_id, document_id) DO UPDATE
SET content = CASE WHEN $9 THEN documents.content || E'\\n\\n' || EXCLUDED.content
                   ELSE EXCLUDED.content END,
    content_hash = EXCLUDED.content_hash, context = EXCLUDED.context,
    metadata = documents.metadata || EXCLUDED.metadata,
    tags = CASE WHEN $9 THEN ARRAY(SELECT DISTINCT unnest(documents.tags || EXCLUDED.tags))
                ELSE EXCLUDED.tags END,
    mentioned_at = greatest(documents.mentioned_at, EXCLUDED.mentioned_at),
    updated_at = now()
"""

_DROP_CHUNKS = "DELETE FROM chunks WHERE bank_id = $1 AND chunk_id = ANY($2::text[])"

_CHUNKS = """
INSERT INTO chunks (bank_id, chunk_id, document_id, chunk_index, content, content_hash,
                    char_start, char_end)
SELECT $1, * FROM unnest($2::text[], $3::text[], $4::int[], $5::text[], $6::text[], $7::int[],
                         $8::int[])
ON CONFLICT (bank_id, chunk_id) DO NOTHING
"""

_STAGED = """
SELECT fact_id, chunk_id, fact, embedding, token_vectors, entity_ids, links FROM staged_facts
WHERE bank_id = $1 AND document_id = $2 AND chunk_id = ANY($3::text[])
  AND embedding IS NOT NULL
ORDER BY chunk_id, (fact->'_chunk'->>'index')::int
"""

_UNITS = """
INSERT INTO memory_units (id, bank_id, document_id, chunk_id, fact_type, text, context, details,
                          occurred_start, occurred_end, mentioned_at, metadata, tags,
                          source_start, source_end, embedding, token_count, token_vectors)
SELECT u.id, $1, $2, u.chunk_id, u.fact_type, u.text, u.context, u.details, u.occurred_start,
       u.occurred_end, u.mentioned_at, u.metadata,
       ARRAY(SELECT jsonb_array_elements_text(u.tags::jsonb)), u.source_start, u.source_end,
       u.embedding, u.token_count, u.token_vectors
FROM unnest($3::uuid[], $4::text[], $5::text[], $6::text[], $7::text[], $8::jsonb[],
            $9::timestamptz[], $10::timestamptz[], $11::timestamptz[], $12::jsonb[],
            $13::text[], $14::int[], $15::int[], $16::vector[], $17::int[], $18::bytea[])
     AS u(id, chunk_id, fact_type, text, context, details, occurred_start, occurred_end,
          mentioned_at, metadata, tags, source_start, source_end, embedding, token_count,
          token_vectors)
ON CONFLICT (id) DO NOTHING
"""

_TERMS = """
INSERT INTO memory_terms (bank_id, term, unit_id, tf)
SELECT $1, * FROM unnest($2::text[], $3::uuid[], $4::int[])
ON CONFLICT DO NOTHING
"""

_UNIT_ENTITIES = """
INSERT INTO unit_entities (unit_id, entity_id, bank_id)
SELECT u, e, $1 FROM unnest($2::uuid[], $3::uuid[]) AS t(u, e)
ON CONFLICT DO NOTHING
"""

_LINKS = """
WITH given AS (
    SELECT t.f, t.t, t.k, t.w FROM unnest($2::uuid[], $3::uuid[], $4::text[], $5::real[])
         AS t(f, t, k, w)
), stored AS (
    INSERT INTO memory_links (bank_id, from_unit, to_unit, link_type, weight)
    SELECT $1, g.f, g.t, g.k, g.w FROM given g
    WHERE EXISTS (SELECT 1 FROM memory_units m WHERE m.id = g.t)
    ON CONFLICT DO NOTHING
    RETURNING 1
), pending AS (
    INSERT INTO pending_links (bank_id, from_unit, to_unit, link_type, weight)
    SELECT $1, g.f, g.t, g.k, g.w FROM given g
    WHERE NOT EXISTS (SELECT 1 FROM memory_units m WHERE m.id = g.t)
    ON CONFLICT DO NOTHING
)
SELECT count(*) FROM stored
"""

# Links that waited for these facts (see pending_links) are stored now.
_ARRIVED = """
WITH arrived AS (
    DELETE FROM pending_links WHERE to_unit = ANY($1::uuid[])
    RETURNING bank_id, from_unit, to_unit, link_type, weight
)
INSERT INTO memory_links (bank_id, from_unit, to_unit, link_type, weight)
SELECT bank_id, from_unit, to_unit, link_type, weight FROM arrived
ON CONFLICT DO NOTHING
"""

# Entity rows are locked in id order before they are updated (resolve adds aliases in the same
# order), so concurrent upserts touching the same entities queue instead of deadlocking.
_LOCK_ENTITIES = """
SELECT count(*) FROM (
    SELECT 1 FROM entities WHERE id = ANY($1::uuid[]) ORDER BY id FOR NO KEY UPDATE
) locked
"""

_REFRESH_ENTITIES = """
UPDATE entities e SET
    mention_count = (SELECT count(*) FROM unit_entities ue WHERE ue.entity_id = e.id),
    last_seen = greatest(e.last_seen, (
        SELECT max(coalesce(m.occurred_start, m.mentioned_at)) FROM unit_entities ue
        JOIN memory_units m ON m.id = ue.unit_id WHERE ue.entity_id = e.id))
WHERE e.id = ANY($1::uuid[])
"""

DELETE_ORPHAN_ENTITIES = """
DELETE FROM entities e WHERE e.bank_id = $1 AND e.id = ANY($2::uuid[])
  AND NOT EXISTS (SELECT 1 FROM unit_entities ue WHERE ue.entity_id = e.id)
"""

_ENTITIES_OF_CHUNKS = """
SELECT DISTINCT ue.entity_id FROM unit_entities ue JOIN memory_units m ON m.id = ue.unit_id
WHERE m.bank_id = $1 AND m.chunk_id = ANY($2::text[])
"""

_COUNT_FACTS = "SELECT count(*) FROM memory_units WHERE bank_id = $1 AND chunk_id = ANY($2::text[])"


def _details(fact: dict[str, Any]) -> dict[str, Any]:
    return {key: fact.get(key) for key in ("who", "what", "where", "when", "why") if fact.get(key)}


async def upsert_document(conn: Connection, job: UpsertDocument) -> UpsertResult:
    plan = job.plan
    bank = job.bank_id
    async with conn.transaction():
        await conn.execute(_LOCK, bank, plan.document_id)
        content = "\n\n".join(item.content for item in job.items)
        first = job.items[0] if job.items else None
        stamps = [item.timestamp for item in job.items if item.timestamp is not None]
        metadata: dict[str, str] = {}
        tags: list[str] = []
        for item in job.items:
            metadata.update(item.metadata)
            tags += [t for t in item.tags if t not in tags]
        await conn.execute(
            _DOCUMENT,
            bank,
            plan.document_id,
            content,
            hashlib.sha256(content.encode()).hexdigest(),
            first.context if first else "",
            metadata,
            tags,
            max(stamps) if stamps else None,
            job.update_mode == "append",
        )
        removed_entities = [
            r["entity_id"]
            for r in await conn.fetch(_ENTITIES_OF_CHUNKS, bank, plan.dropped_chunk_ids)
        ]
        facts_removed = await conn.fetchval(_COUNT_FACTS, bank, plan.dropped_chunk_ids)
        await conn.execute(_DROP_CHUNKS, bank, plan.dropped_chunk_ids)
        chunks = plan.new_chunks
        await conn.execute(
            _CHUNKS,
            bank,
            [c.chunk_id for c in chunks],
            [c.document_id for c in chunks],
            list(range(len(chunks))),
            [c.text for c in chunks],
            [c.content_hash for c in chunks],
            [c.char_start for c in chunks],
            [c.char_end for c in chunks],
        )
        chunk_ids = [c.chunk_id for c in chunks]
        staged = await conn.fetch(_STAGED, bank, plan.document_id, chunk_ids)
        links_added = await _store_units(conn, bank, plan.document_id, staged)
        touched = sorted({eid for row in staged for eid in (row["entity_ids"] or [])})
        await conn.execute(_LOCK_ENTITIES, touched + removed_entities)
        await conn.execute(_REFRESH_ENTITIES, touched + removed_entities)
        await conn.execute(DELETE_ORPHAN_ENTITIES, bank, removed_entities)
        await conn.execute(
            "DELETE FROM staged_facts WHERE bank_id = $1 AND document_id = $2"
            " AND (chunk_id = ANY($3::text[]) OR operation_id = $4)",
            bank,
            plan.document_id,
            chunk_ids,
            job.operation_id,
        )
        facts_added = await conn.fetchval(_COUNT_FACTS, bank, chunk_ids)
    return UpsertResult(
        document_id=plan.document_id,
        facts_added=int(facts_added),
        facts_removed=int(facts_removed),
        chunks_added=len(chunks),
        chunks_removed=len(plan.dropped_chunk_ids),
        links_added=links_added,
    )


async def _store_units(
    conn: Connection, bank: str, document_id: str, staged: list[asyncpg.Record]
) -> int:
    if not staged:
        return 0
    ids, chunk_ids, types, texts, contexts, details = [], [], [], [], [], []
    starts, ends, mentioned, metadata, tags, src_start, src_end = [], [], [], [], [], [], []
    embeddings, token_counts, token_vectors = [], [], []
    term_rows: tuple[list[str], list[Any], list[int]] = ([], [], [])
    entity_rows: tuple[list[Any], list[Any]] = ([], [])
    link_rows: tuple[list[Any], list[str], list[str], list[float]] = ([], [], [], [])
    for row in staged:
        fact = row["fact"]
        meta = fact.get("_chunk", {})
        ids.append(row["fact_id"])
        chunk_ids.append(row["chunk_id"])
        types.append(fact.get("fact_type", "world"))
        texts.append(fact["text"])
        contexts.append(meta.get("context", ""))
        details.append(_details(fact))
        starts.append(_ts(fact.get("occurred_start")))
        ends.append(_ts(fact.get("occurred_end")))
        mentioned.append(_ts(meta.get("mentioned_at")))
        metadata.append(meta.get("metadata", {}))
        tags.append(json.dumps(meta.get("tags", [])))  # a list would read as a 2-D array
        src_start.append(fact.get("source_start"))
        src_end.append(fact.get("source_end"))
        embeddings.append(row["embedding"])
        token_vectors.append(row["token_vectors"])
        tf, length = term_frequencies(fact["text"])
        token_counts.append(length)
        for term, count in tf.items():
            term_rows[0].append(term)
            term_rows[1].append(row["fact_id"])
            term_rows[2].append(count)
        for eid in row["entity_ids"] or []:
            entity_rows[0].append(row["fact_id"])
            entity_rows[1].append(eid)
        for link in row["links"] or []:
            link_rows[0].append(row["fact_id"])
            link_rows[1].append(link["to"])
            link_rows[2].append(link["type"])
            link_rows[3].append(float(link["weight"]))
    await conn.execute(
        _UNITS,
        bank,
        document_id,
        ids,
        chunk_ids,
        types,
        texts,
        contexts,
        details,
        starts,
        ends,
        mentioned,
        metadata,
        tags,
        src_start,
        src_end,
        embeddings,
        token_counts,
        token_vectors,
    )
    await conn.execute(_TERMS, bank, *term_rows)
    await conn.execute(_UNIT_ENTITIES, bank, *entity_rows)
    stored = await conn.fetchval(_LINKS, bank, *link_rows)
    arrived = await conn.execute(_ARRIVED, ids)
    return int(stored) + int(arrived.rsplit(" ", 1)[-1])


def _ts(raw: str | None) -> datetime | None:
    return datetime.fromisoformat(raw) if raw else None
