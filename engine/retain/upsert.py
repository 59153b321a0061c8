"""Step 6: move a document's staged facts into memory in one transaction.

Re-running it is harmless: chunks and facts carry deterministic ids (`ON CONFLICT DO
NOTHING`), staged rows are cleared only in the transaction that stored them, and a
transaction-level advisory lock on (bank, document) keeps two upserts of one document from
interleaving even outside Temporal's per-document workflow ids.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from engine.db import Connection
from engine.lifecycle.on_retain import lifecycle_after_store
from engine.lifecycle.tombstones import apply_tombstones, blank_passages, find_tombstones
from engine.retain.documents import item_span
from engine.retain.payloads import ChunkJob, UpsertDocument, UpsertResult
from engine.text import term_frequencies

# The documents' advisory locks, in one statement, in code-point order (the order the
# single-statement per-document locks were taken in before).
_LOCK = """
SELECT count(pg_advisory_xact_lock(hashtextextended($1 || E'\\x1f' || d, 0)))
FROM (SELECT d FROM unnest($2::text[]) AS d ORDER BY d COLLATE "C") ordered
"""

_DOCUMENT = """
INSERT INTO documents (bank_id, document_id, content, content_hash, context, metadata, tags,
                       mentioned_at, items)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $10::jsonb)
ON CONFLICT (bank_id, document_id) DO UPDATE
SET content = CASE WHEN $9 THEN documents.content || E'\\n\\n' || EXCLUDED.content
                   -- the same text again: keep the stored one, which erasure may have blanked
                   WHEN documents.content_hash = EXCLUDED.content_hash THEN documents.content
                   ELSE EXCLUDED.content END,
    content_hash = EXCLUDED.content_hash, context = EXCLUDED.context,
    metadata = documents.metadata || EXCLUDED.metadata,
    tags = CASE WHEN $9 THEN ARRAY(SELECT DISTINCT unnest(documents.tags || EXCLUDED.tags))
                ELSE EXCLUDED.tags END,
    mentioned_at = greatest(documents.mentioned_at, EXCLUDED.mentioned_at),
    items = CASE WHEN $9 THEN documents.items || EXCLUDED.items ELSE EXCLUDED.items END,
    updated_at = now()
"""

_DROP_CHUNKS = "DELETE FROM chunks WHERE bank_id = $1 AND chunk_id = ANY($2::text[])"

# Lock order, shared with consolidation (engine/consolidation/candidates.py): facts first (in
# consolidation's order: event time, then id), then the bank's statistics row (taken by the
# fact delete's trigger, or by the statistics this upsert adds at its end), then BM25 term
# rows, then entities. Dropping chunks
# deletes their facts through a cascade that interleaves fact, statistics and term locks, so
# the facts are locked here first.
_LOCK_DROPPED_FACTS = """
SELECT count(*) FROM (
    SELECT 1 FROM memory_units WHERE bank_id = $1 AND chunk_id = ANY($2::text[])
    ORDER BY coalesce(occurred_start, mentioned_at, created_at), id
    FOR UPDATE
) locked
"""

_CHUNKS = """
INSERT INTO chunks (bank_id, chunk_id, document_id, chunk_index, content, content_hash,
                    char_start, char_end)
SELECT $1, * FROM unnest($2::text[], $3::text[], $4::int[], $5::text[], $6::text[], $7::int[],
                         $8::int[])
ON CONFLICT (bank_id, chunk_id) DO NOTHING
"""

# What the worker itself needs of the staged facts: the text for the BM25 terms (tokenised in
# Python, engine/text.py) and the entity ids. Everything else moves from staged_facts to
# memory_units inside PostgreSQL (_UNITS): sending every fact's embedding and token vectors
# (~15 KB a fact) to the worker and back cost a round trip of ~20 MB per LoCoMo document and
# the decoding and re-encoding of both.
_STAGED = """
SELECT fact_id, document_id, fact->>'text' AS text, entity_ids, chunk_id,
       (fact->>'source_start')::int AS source_start, (fact->>'source_end')::int AS source_end
FROM staged_facts
WHERE bank_id = $1 AND document_id = ANY($2::text[]) AND chunk_id = ANY($3::text[])
  AND embedding IS NOT NULL
ORDER BY document_id, chunk_id, (fact->'_chunk'->>'index')::int
"""

# Staged facts become memory units, in the order given ($2) with their token counts ($3).
# `details` keeps the non-empty ones of who/what/where/when/why (JSON null, "" and [] are
# empty, as they were when this was built in Python).
_UNITS = """
INSERT INTO memory_units (id, bank_id, document_id, chunk_id, fact_type, text, context, details,
                          occurred_start, occurred_end, mentioned_at, metadata, tags,
                          source_start, source_end, embedding, token_count, token_vectors,
                          importance, strength, valid_from)
SELECT s.fact_id, $1, s.document_id, s.chunk_id, coalesce(s.fact->>'fact_type', 'world'),
       s.fact->>'text', coalesce(s.fact->'_chunk'->>'context', ''),
       coalesce((SELECT jsonb_object_agg(k, s.fact->k)
                 FROM unnest(ARRAY['who', 'what', 'where', 'when', 'why']) AS k
                 WHERE coalesce(s.fact->k, 'null') NOT IN ('null', '""', '[]')), '{}'),
       nullif(s.fact->>'occurred_start', '')::timestamptz,
       nullif(s.fact->>'occurred_end', '')::timestamptz,
       nullif(s.fact->'_chunk'->>'mentioned_at', '')::timestamptz,
       coalesce(s.fact->'_chunk'->'metadata', '{}'),
       ARRAY(SELECT jsonb_array_elements_text(coalesce(s.fact->'_chunk'->'tags', '[]'))),
       (s.fact->>'source_start')::int, (s.fact->>'source_end')::int,
       s.embedding, u.token_count, s.token_vectors,
       coalesce((s.fact->>'importance')::real, 0.5), coalesce((s.fact->>'importance')::real, 0.5),
       -- valid from when it happened or was said, whichever came first (a plan is held
       -- from when it was made); see docs/lifecycle.md
       least(nullif(s.fact->>'occurred_start', '')::timestamptz,
             nullif(s.fact->'_chunk'->>'mentioned_at', '')::timestamptz)
FROM unnest($2::uuid[], $3::int[]) WITH ORDINALITY AS u(fact_id, token_count, ord)
JOIN staged_facts s ON s.fact_id = u.fact_id
ORDER BY u.ord
ON CONFLICT (id) DO NOTHING
RETURNING token_count
"""

_TERMS = """
INSERT INTO memory_terms (bank_id, term, unit_id, tf)
SELECT $1, * FROM unnest($2::text[], $3::uuid[], $4::int[])
ON CONFLICT DO NOTHING
RETURNING term
"""

# The BM25 statistics of the facts and terms inserted above, applied by the upsert itself
# just before it commits (migration 0028): the insert triggers would lock the bank's
# statistics row and its shared term rows from the first insert to the commit, and every
# batch of the bank queued behind the rest of the one before (LoCoMo, one document per
# message, 32 batches in flight: upsert_documents 2.0 s a batch, mostly waiting). Only the
# rows these statements inserted count (RETURNING of ON CONFLICT DO NOTHING), so a retried
# or overlapping upsert adds nothing twice. Term rows in term order, as the trigger did.
_DEFER_STATISTICS = "SELECT set_config('engram.deferred_statistics', $1, true)"
_ADD_BANK_STATS = """
INSERT INTO bank_stats AS s (bank_id, unit_count, total_terms) VALUES ($1, $2, $3)
ON CONFLICT (bank_id) DO UPDATE
SET unit_count = s.unit_count + EXCLUDED.unit_count,
    total_terms = s.total_terms + EXCLUDED.total_terms
"""
_ADD_TERM_STATS = """
INSERT INTO bank_term_stats AS s (bank_id, term, df)
SELECT $1, d.term, d.n FROM unnest($2::text[], $3::int[]) AS d(term, n) ORDER BY d.term
ON CONFLICT (bank_id, term) DO UPDATE SET df = s.df + EXCLUDED.df
"""

_UNIT_ENTITIES = """
INSERT INTO unit_entities (unit_id, entity_id, bank_id)
SELECT s.fact_id, e.id, $1
FROM unnest($2::uuid[]) WITH ORDINALITY AS u(fact_id, ord)
JOIN staged_facts s ON s.fact_id = u.fact_id
CROSS JOIN LATERAL unnest(s.entity_ids) WITH ORDINALITY AS e(id, pos)
ORDER BY u.ord, e.pos
ON CONFLICT DO NOTHING
"""

# The links planned by the link step (engine/retain/links.py), read from staging.
_LINKS = """
WITH given AS (
    SELECT s.fact_id AS f, (l->>'to')::uuid AS t, l->>'type' AS k, (l->>'weight')::real AS w
    FROM staged_facts s CROSS JOIN LATERAL jsonb_array_elements(coalesce(s.links, '[]')) AS l
    WHERE s.fact_id = ANY($2::uuid[])
), stored AS (
    INSERT INTO memory_links (bank_id, from_unit, to_unit, link_type, weight)
    SELECT $1, g.f, g.t, g.k, g.w FROM given g
    WHERE EXISTS (SELECT 1 FROM memory_units m WHERE m.id = g.t)
    ON CONFLICT DO NOTHING
    RETURNING from_unit
), pending AS (
    INSERT INTO pending_links (bank_id, from_unit, to_unit, link_type, weight)
    SELECT $1, g.f, g.t, g.k, g.w FROM given g
    WHERE NOT EXISTS (SELECT 1 FROM memory_units m WHERE m.id = g.t)
    ON CONFLICT DO NOTHING
)
SELECT from_unit FROM stored
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
RETURNING to_unit
"""

# Entity rows are locked in id order before they are updated (resolve adds aliases in the same
# order), so concurrent upserts touching the same entities queue instead of deadlocking.
_LOCK_ENTITIES = """
SELECT count(*) FROM (
    SELECT 1 FROM entities WHERE id = ANY($1::uuid[]) ORDER BY id FOR NO KEY UPDATE
) locked
"""

# Entities that lost facts (dropped chunks) are recounted; the others only gained the facts
# this upsert inserted ($2), so their counts grow by those: a recount of every touched entity
# read all the mentions of a popular one (thousands) per document, under its row lock.
_REFRESH_ENTITIES = """
UPDATE entities e SET
    mention_count = (SELECT count(*) FROM unit_entities ue WHERE ue.entity_id = e.id),
    last_seen = greatest(e.last_seen, (
        SELECT max(coalesce(m.occurred_start, m.mentioned_at)) FROM unit_entities ue
        JOIN memory_units m ON m.id = ue.unit_id WHERE ue.entity_id = e.id))
WHERE e.id = ANY($1::uuid[])
"""
_COUNT_ADDED_MENTIONS = """
UPDATE entities e
SET mention_count = e.mention_count + a.n, last_seen = greatest(e.last_seen, a.seen)
FROM (SELECT ue.entity_id, count(*) AS n, max(coalesce(m.occurred_start, m.mentioned_at)) AS seen
      FROM unit_entities ue JOIN memory_units m ON m.id = ue.unit_id
      WHERE ue.unit_id = ANY($2::uuid[]) GROUP BY ue.entity_id) a
WHERE e.id = a.entity_id AND NOT (e.id = ANY($1::uuid[]))
"""
_NEW_FACTS = """
SELECT coalesce(array_agg(u.id), '{}') FROM unnest($1::uuid[]) AS u(id)
WHERE NOT EXISTS (SELECT 1 FROM memory_units m WHERE m.id = u.id)
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

_FACTS_PER_DOCUMENT = """
SELECT document_id, count(*) FROM memory_units WHERE bank_id = $1 AND chunk_id = ANY($2::text[])
GROUP BY document_id
"""

_CLEAR_STAGED = """
DELETE FROM staged_facts WHERE bank_id = $1 AND document_id = ANY($2::text[])
  AND (chunk_id = ANY($3::text[]) OR operation_id = ANY($4::text[]))
"""


async def upsert_document(conn: Connection, job: UpsertDocument) -> UpsertResult:
    [result] = await upsert_documents(conn, [job])
    return result


async def upsert_documents(conn: Connection, jobs: list[UpsertDocument]) -> list[UpsertResult]:
    """Store several documents of one bank in one transaction (results in the jobs' order).

    A batch of documents is one transaction with one statement per step, not one per
    document: round trips and the BM25 statistics triggers run once per batch, and the entity
    rows nearly every fact names (a conversation's speakers) are locked and recounted once.
    Locks follow the order above for the whole batch: the documents' advisory locks (in id
    order), then every dropped fact, then what the inserts take."""
    if not jobs:
        return []
    bank = jobs[0].bank_id
    documents = [job.plan.document_id for job in jobs]
    async with conn.transaction():
        await conn.execute(_LOCK, bank, sorted(set(documents)))
        dropped = [cid for job in jobs for cid in job.plan.dropped_chunk_ids]
        if dropped:
            await conn.execute(_LOCK_DROPPED_FACTS, bank, dropped)
        removed_entities: list[Any] = []
        facts_removed: list[int] = []
        chunks: list[ChunkJob] = []
        chunk_index: list[int] = []
        staged: list[asyncpg.Record] = []
        new_ids = [c.chunk_id for job in jobs for c in job.plan.new_chunks]
        by_document: dict[str, list[asyncpg.Record]] = {}
        rows = await conn.fetch(_STAGED, bank, documents, new_ids)
        for row in rows:
            by_document.setdefault(row["document_id"], []).append(row)
        # What was forgotten is not stored again (engine/lifecycle/tombstones.py).
        found = await find_tombstones(
            conn, bank, [c for job in jobs for c in job.plan.new_chunks], rows
        )
        kept = [
            apply_tombstones(found, job.plan.new_chunks, by_document.get(job.plan.document_id, []))
            for job in jobs
        ]
        await conn.executemany(
            _DOCUMENT, [_document_row(job, k.passages) for job, k in zip(jobs, kept, strict=True)]
        )
        for job, k in zip(jobs, kept, strict=True):
            removed, gone = await _drop_chunks(conn, job)
            facts_removed.append(removed)
            removed_entities += gone + list(k.entity_ids)
            chunks += k.chunks
            chunk_index += range(len(k.chunks))
            staged += k.staged
        await conn.execute(
            _CHUNKS,
            bank,
            [c.chunk_id for c in chunks],
            [c.document_id for c in chunks],
            chunk_index,
            [c.text for c in chunks],
            [c.content_hash for c in chunks],
            [c.char_start for c in chunks],
            [c.char_end for c in chunks],
        )
        chunk_ids = new_ids
        new_facts = await conn.fetchval(_NEW_FACTS, [row["fact_id"] for row in staged])
        stored = await _store_units(conn, bank, staged)
        added: dict[str, int] = {
            r["document_id"]: r["count"]
            for r in await conn.fetch(_FACTS_PER_DOCUMENT, bank, chunk_ids)
        }
        # The shared rows last, in the lock order above: statistics, term rows, entities. The
        # statistics row also orders the link step's writes of concurrent upserts of the bank:
        # each stores a link, or parks it in pending_links, by whether its target is stored,
        # and collects the links parked for its own facts, which is only right when every
        # other upsert's facts and parked links are committed or not yet written.
        if staged:
            await conn.execute(_ADD_BANK_STATS, bank, stored.units, stored.tokens)
            links = await _store_links(conn, bank, staged)
        else:
            links = {}
        # Supersession and restoring of archived facts (docs/lifecycle.md), same transaction,
        # also under the statistics row: a fact compares itself with the bank's facts, so a
        # concurrent upsert's facts must be committed or not yet written ("Maya moved to
        # Porto" in one batch superseded nothing when "Maya lives in Lisbon" was in another
        # batch in flight beside it).
        await lifecycle_after_store(conn, bank, [row["fact_id"] for row in staged])
        operations = sorted({job.operation_id for job in jobs})
        await conn.execute(_CLEAR_STAGED, bank, documents, chunk_ids, operations)
        if stored.terms:
            terms = sorted(stored.terms)
            await conn.execute(_ADD_TERM_STATS, bank, terms, [stored.terms[t] for t in terms])
        touched = {eid for row in staged for eid in (row["entity_ids"] or [])}
        everything = sorted(touched | set(removed_entities))
        # Every statement here runs while this batch holds the bank's statistics row, so the
        # ones with nothing to do are not sent (a round trip to a busy worker costs).
        if everything:
            await conn.execute(_LOCK_ENTITIES, everything)
        if removed_entities:
            await conn.execute(_REFRESH_ENTITIES, removed_entities)
        if new_facts:
            await conn.execute(_COUNT_ADDED_MENTIONS, removed_entities, new_facts)
        if removed_entities:
            await conn.execute(DELETE_ORPHAN_ENTITIES, bank, removed_entities)
    return [
        UpsertResult(
            document_id=job.plan.document_id,
            facts_added=int(added.get(job.plan.document_id, 0)),
            facts_removed=removed,
            chunks_added=len(job.plan.new_chunks),
            chunks_removed=len(job.plan.dropped_chunk_ids),
            links_added=links.get(job.plan.document_id, 0),
        )
        for job, removed in zip(jobs, facts_removed, strict=True)
    ]


def _document_row(job: UpsertDocument, forgotten: list[str]) -> tuple[Any, ...]:
    """A document's row (with the `forgotten` passages blanked): _DOCUMENT's arguments."""
    content = "\n\n".join(item.content for item in job.items)
    first = job.items[0] if job.items else None
    stamps = [item.timestamp for item in job.items if item.timestamp is not None]
    metadata: dict[str, str] = {}
    tags: list[str] = []
    for item in job.items:
        metadata.update(item.metadata)
        tags += [t for t in item.tags if t not in tags]
    return (
        job.bank_id,
        job.plan.document_id,
        blank_passages(content, forgotten),
        hashlib.sha256(content.encode()).hexdigest(),
        first.context if first else "",
        metadata,
        tags,
        max(stamps) if stamps else None,
        job.update_mode == "append",
        [item_span(item) for item in job.items],
    )


async def _drop_chunks(conn: Connection, job: UpsertDocument) -> tuple[int, list[Any]]:
    """A document's dropped chunks: returns the facts removed and the entities they named
    (their counts are refreshed once for the batch)."""
    plan = job.plan
    if not plan.dropped_chunk_ids:
        return 0, []
    bank = job.bank_id
    removed_entities = [
        r["entity_id"] for r in await conn.fetch(_ENTITIES_OF_CHUNKS, bank, plan.dropped_chunk_ids)
    ]
    facts_removed = await conn.fetchval(_COUNT_FACTS, bank, plan.dropped_chunk_ids)
    await conn.execute(_DROP_CHUNKS, bank, plan.dropped_chunk_ids)
    return int(facts_removed), removed_entities


@dataclass
class _Stored:
    """What one upsert inserted, for the statistics it adds at its end."""

    units: int = 0
    tokens: int = 0
    terms: Counter[str] = field(default_factory=Counter)


async def _store_units(conn: Connection, bank: str, staged: list[asyncpg.Record]) -> _Stored:
    """Staged facts (of any documents) into memory; their statistics and links are left to
    the caller."""
    stored = _Stored()
    if not staged:
        return stored
    ids = [row["fact_id"] for row in staged]
    token_counts: list[int] = []
    term_rows: tuple[list[str], list[Any], list[int]] = ([], [], [])
    for row in staged:
        tf, length = term_frequencies(row["text"])
        token_counts.append(length)
        for term, count in tf.items():
            term_rows[0].append(term)
            term_rows[1].append(row["fact_id"])
            term_rows[2].append(count)
    await conn.execute(_DEFER_STATISTICS, "on")
    units = await conn.fetch(_UNITS, bank, ids, token_counts)
    terms = await conn.fetch(_TERMS, bank, *term_rows)
    await conn.execute(_DEFER_STATISTICS, "off")
    stored.units = len(units)
    stored.tokens = sum(r["token_count"] for r in units)
    stored.terms.update(r["term"] for r in terms)
    await conn.execute(_UNIT_ENTITIES, bank, ids)
    return stored


async def _store_links(conn: Connection, bank: str, staged: list[asyncpg.Record]) -> dict[str, int]:
    """The staged facts' planned links into memory; returns the links stored per document."""
    ids = [row["fact_id"] for row in staged]
    document_of = {row["fact_id"]: row["document_id"] for row in staged}
    links: dict[str, int] = {}
    # A stored link counts for its source's document; a link that waited for one of these
    # facts, for the document of the fact that arrived.
    for row in await conn.fetch(_LINKS, bank, ids):
        document = document_of[row["from_unit"]]
        links[document] = links.get(document, 0) + 1
    for row in await conn.fetch(_ARRIVED, ids):
        document = document_of[row["to_unit"]]
        links[document] = links.get(document, 0) + 1
    return links
