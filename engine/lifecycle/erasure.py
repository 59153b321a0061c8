"""Erasure: forget facts by id or by filter, completely (docs/lifecycle.md).

One transaction removes, for the selected facts:
- the facts (memory_units) and with them, by cascade, their BM25 postings, links, entity
  mentions, versions, feedback and observation evidence; BM25 statistics follow through the
  triggers, and term rows left at df 0 are deleted (the term itself is content);
- their source text: a fact whose span in its chunk is known (the local extractor records
  it) has that span blanked in the chunk and in the document text; a fact without a span
  takes its whole chunk with it (and that chunk's other facts: the chunk's text is the only
  copy of what it says, and cannot be cut at a place nobody recorded); a forget by `text`
  also blanks every remaining occurrence of the text in the bank's chunks and documents;
- entities left with no mention; observations that rested on a forgotten fact (retracted,
  with their history; their other evidence is marked unconsolidated so consolidation
  rebuilds them); forgotten ids in mental models' `based_on` (a model that cited one loses
  its content and versions until its next refresh); staged facts of the same text;
- and leaves tombstones: the sha256 of each forgotten fact's text and the fingerprint of each
  removed chunk, so a later retain or import of the same document stores neither again
  (engine/retain/upsert.py). A blanked chunk keeps its fingerprint, so re-sending its
  document re-extracts nothing from it.
What this does not reach: copies in Temporal workflow histories (issue 16 moves memory text
out of workflow payloads) and PostgreSQL's free space until VACUUM.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import asyncpg

from engine.db import Connection
from engine.entities import normalize_name
from engine.errors import InvalidInput, NotFound
from engine.lifecycle.access_state import drop_access
from engine.lifecycle.tombstones import text_hash
from engine.retain.upsert import DELETE_ORPHAN_ENTITIES
from engine.store.backlog import requeue_statement
from engine.store.document_files import drop_originals
from engine.store.document_history import record_event
from engine.store.locks import consolidation_lock


@dataclass(frozen=True)
class ForgetFilter:
    memory_ids: tuple[str, ...] = ()
    entity: str | None = None  # an entity id or name: its facts, and facts naming it
    tags: tuple[str, ...] = ()  # facts carrying any of these tags
    document_id: str | None = None
    text: str | None = None  # case-insensitive substring of the fact text
    start: datetime | None = None  # on the fact's time (occurred, else mentioned, else stored)
    end: datetime | None = None

    def validated(self) -> ForgetFilter:
        if not (
            self.memory_ids
            or self.entity
            or self.tags
            or self.document_id
            or self.text
            or self.start
            or self.end
        ):
            raise InvalidInput(
                "filter",
                "name at least one of entity, tags, document_id, text, "
                "start, end (forgetting a whole bank is DELETE .../memories)",
            )
        if self.text is not None and len(self.text.strip()) < 3:
            raise InvalidInput("text", "must be at least 3 characters")
        if self.start and self.end and self.end < self.start:
            raise InvalidInput("end", "is before start")
        return self


@dataclass(frozen=True)
class ForgottenFact:
    id: str
    text: str
    fact_type: str
    document_id: str | None
    collateral: bool  # not selected, but shares a chunk removed whole


@dataclass(frozen=True)
class ForgetResult:
    dry_run: bool
    facts: list[ForgottenFact]
    observations_retracted: list[str] = field(default_factory=list)
    entities_removed: list[str] = field(default_factory=list)
    documents_deleted: list[str] = field(default_factory=list)
    chunks_deleted: int = 0
    chunks_redacted: int = 0
    mental_models_affected: list[str] = field(default_factory=list)

    @property
    def ids(self) -> list[str]:
        return [f.id for f in self.facts]


_SELECT = """
SELECT m.id::text AS id, m.text, m.fact_type, m.document_id, m.chunk_id,
       m.source_start, m.source_end
FROM memory_units m
WHERE m.bank_id = $1
  AND (cardinality($2::uuid[]) = 0 OR m.id = ANY($2::uuid[]))
  AND ($3::uuid[] IS NULL OR EXISTS (SELECT 1 FROM unit_entities ue
                                     WHERE ue.unit_id = m.id AND ue.entity_id = ANY($3::uuid[]))
       OR m.text ILIKE ANY($4::text[]))
  AND (cardinality($5::text[]) = 0 OR m.tags && $5::text[])
  AND ($6::text IS NULL OR m.document_id = $6)
  AND ($7::text IS NULL OR m.text ILIKE $7)
  AND ($8::timestamptz IS NULL OR coalesce(m.occurred_start, m.mentioned_at, m.created_at) >= $8)
  AND ($9::timestamptz IS NULL OR coalesce(m.occurred_start, m.mentioned_at, m.created_at) < $9)
ORDER BY m.id
FOR UPDATE
"""

_ENTITY = """
SELECT id, canonical_name, aliases FROM entities
WHERE bank_id = $1
  AND (id::text = $2 OR normalized_name = $3 OR $3 = ANY(aliases_normalized))
"""

_CHUNKS = """
SELECT chunk_id, document_id, content, content_hash FROM chunks
WHERE bank_id = $1 AND chunk_id = ANY($2::text[])
"""

_CHUNK_FACTS = """
SELECT id::text AS id, text, fact_type, document_id FROM memory_units
WHERE bank_id = $1 AND chunk_id = ANY($2::text[]) AND id <> ALL($3::uuid[])
"""

_OBSERVATIONS = """
SELECT DISTINCT observation_id::text AS id FROM observation_evidence
WHERE bank_id = $1 AND fact_id = ANY($2::uuid[])
"""

# Retracted observations' other evidence (not erased itself) waits for consolidation again.
_REQUEUE_EVIDENCE = requeue_statement(
    "m.bank_id = $1 AND m.id IN (SELECT fact_id FROM observation_evidence"
    " WHERE observation_id = ANY($2::uuid[])) AND m.id <> ALL($3::uuid[])"
)
_MENTAL_MODELS = """
SELECT id FROM mental_models WHERE bank_id = $1 AND based_on_ids && $2::uuid[]
"""


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _blank(content: str, start: int, end: int) -> str:
    """Spaces over [start, end): the offsets of every other fact in the chunk still hold."""
    return content[:start] + " " * (end - start) + content[end:]


def _blank_all(content: str, needle: str) -> str:
    lowered, target = content.casefold(), needle.casefold()
    if len(lowered) != len(content):  # case folding changed lengths: match exactly only
        return content.replace(needle, " " * len(needle))
    at = lowered.find(target)
    while at >= 0:
        content = _blank(content, at, at + len(needle))
        lowered = content.casefold()
        at = lowered.find(target, at + len(needle))
    return content


async def forget(
    conn: Connection, bank_id: str, where: ForgetFilter, *, dry_run: bool = False
) -> ForgetResult:
    """Forget what `where` selects (see the module docstring); with `dry_run`, only say what
    would go. Runs in its own transaction."""
    where = where.validated()
    async with conn.transaction():
        if not dry_run:
            await consolidation_lock(conn, bank_id)
        return await _forget(conn, bank_id, where, dry_run)


async def _forget(
    conn: Connection, bank_id: str, where: ForgetFilter, dry_run: bool
) -> ForgetResult:
    entity_ids: list[Any] | None = None
    entity_names: list[str] = []
    if where.entity:
        rows = await conn.fetch(_ENTITY, bank_id, where.entity, normalize_name(where.entity))
        if not rows:
            raise NotFound("entity", where.entity)
        entity_ids = [r["id"] for r in rows]
        for r in rows:
            entity_names += [r["canonical_name"], *r["aliases"]]
    try:
        selected = await conn.fetch(
            _SELECT,
            bank_id,
            list(where.memory_ids),
            entity_ids,
            [f"%{_escape_like(n)}%" for n in entity_names if len(n) >= 3],
            list(where.tags),
            where.document_id,
            f"%{_escape_like(where.text)}%" if where.text else None,
            where.start,
            where.end,
        )
    except asyncpg.DataError as exc:
        raise InvalidInput("memory_ids", "are not all memory ids") from exc
    if where.memory_ids and len(selected) < len(set(where.memory_ids)):
        found = {r["id"] for r in selected}
        missing = next(i for i in where.memory_ids if i not in found)
        raise NotFound("memory", missing)
    ids = [r["id"] for r in selected]
    # Chunks: blank the spans of facts that have one; remove whole the chunks of those
    # without (or of a forget by document).
    chunk_ids = sorted({r["chunk_id"] for r in selected if r["chunk_id"]})
    chunks = {r["chunk_id"]: r for r in await conn.fetch(_CHUNKS, bank_id, chunk_ids)}
    whole = {
        r["chunk_id"]
        for r in selected
        if r["chunk_id"] and (r["source_start"] is None or where.document_id is not None)
    }
    collateral = await conn.fetch(_CHUNK_FACTS, bank_id, sorted(whole), ids) if whole else []
    all_ids = ids + [r["id"] for r in collateral]
    facts = [
        ForgottenFact(r["id"], r["text"], r["fact_type"], r["document_id"], False) for r in selected
    ] + [
        ForgottenFact(r["id"], r["text"], r["fact_type"], r["document_id"], True)
        for r in collateral
    ]
    observations = [
        r["id"] for r in await conn.fetch(_OBSERVATIONS, bank_id, all_ids) if r["id"] not in all_ids
    ]
    models = [r["id"] for r in await conn.fetch(_MENTAL_MODELS, bank_id, all_ids + observations)]
    entities = await _orphaned_entities(conn, bank_id, all_ids + observations)
    documents = await _documents_emptied(conn, bank_id, all_ids, sorted(whole), where)
    result = ForgetResult(
        dry_run=dry_run,
        facts=facts,
        observations_retracted=observations,
        entities_removed=entities,
        documents_deleted=documents,
        chunks_deleted=len(whole),
        chunks_redacted=len(set(chunk_ids) - whole),
        mental_models_affected=models,
    )
    if dry_run or not facts:
        return result
    await _erase(conn, bank_id, where, selected, chunks, whole, all_ids, observations, models)
    touched = Counter(f.document_id for f in facts if f.document_id)
    # An original file holds the forgotten text and cannot be redacted: it goes.
    await drop_originals(conn, bank_id, sorted(touched))
    await record_event(
        conn,
        bank_id,
        "fact_deleted",
        None,
        dict(touched),
        fact_id=facts[0].id if len(facts) == 1 else None,
        observations_removed=observations,
    )
    return result


async def _orphaned_entities(conn: Connection, bank_id: str, ids: list[str]) -> list[str]:
    rows = await conn.fetch(
        "SELECT e.canonical_name FROM entities e WHERE e.bank_id = $1 AND EXISTS"
        " (SELECT 1 FROM unit_entities ue WHERE ue.entity_id = e.id"
        " AND ue.unit_id = ANY($2::uuid[]))"
        " AND NOT EXISTS (SELECT 1 FROM unit_entities ue WHERE ue.entity_id = e.id"
        " AND ue.unit_id <> ALL($2::uuid[])) ORDER BY e.canonical_name",
        bank_id,
        ids,
    )
    return [r["canonical_name"] for r in rows]


async def _documents_emptied(
    conn: Connection, bank_id: str, ids: list[str], whole: list[str], where: ForgetFilter
) -> list[str]:
    """Documents left with no fact and no chunk after the forget (deleted with it)."""
    rows = await conn.fetch(
        "SELECT d.document_id FROM documents d WHERE d.bank_id = $1"
        " AND EXISTS (SELECT 1 FROM memory_units m WHERE m.bank_id = $1"
        "   AND m.document_id = d.document_id AND m.id = ANY($2::uuid[]))"
        " AND NOT EXISTS (SELECT 1 FROM memory_units m WHERE m.bank_id = $1"
        "   AND m.document_id = d.document_id AND m.id <> ALL($2::uuid[]))"
        " ORDER BY d.document_id",
        bank_id,
        ids,
    )
    emptied = [r["document_id"] for r in rows]
    if where.document_id is not None and where.document_id not in emptied:
        exists = await conn.fetchval(
            "SELECT 1 FROM documents WHERE bank_id = $1 AND document_id = $2",
            bank_id,
            where.document_id,
        )
        if exists:
            emptied.append(where.document_id)
    return emptied


async def _erase(
    conn: Connection,
    bank_id: str,
    where: ForgetFilter,
    selected: Sequence[asyncpg.Record],
    chunks: dict[str, asyncpg.Record],
    whole: set[str],
    all_ids: list[str],
    observations: list[str],
    models: list[str],
) -> None:
    texts = {r["id"]: r["text"] for r in selected}
    # Tombstones first: hashes only.
    await conn.execute(
        "INSERT INTO tombstones (bank_id, kind, content_hash)"
        " SELECT $1, 'fact', unnest($2::text[]) ON CONFLICT DO NOTHING",
        bank_id,
        sorted({text_hash(t) for t in texts.values()}),
    )
    await conn.execute(
        "INSERT INTO tombstones (bank_id, kind, content_hash)"
        " SELECT $1, 'chunk', unnest($2::text[]) ON CONFLICT DO NOTHING",
        bank_id,
        sorted(chunks[c]["content_hash"] for c in whole if c in chunks),
    )
    # Source text: blank spans, then cut whole chunks out of their documents.
    cut: dict[str, list[str]] = {}  # document -> raw passages to blank in its text
    blanked: dict[str, str] = {}
    for r in selected:
        chunk = chunks.get(r["chunk_id"]) if r["chunk_id"] else None
        if chunk is None or r["chunk_id"] in whole:
            continue
        content = blanked.get(r["chunk_id"], chunk["content"])
        start, end = r["source_start"], min(r["source_end"] or 0, len(content))
        if 0 <= start < end:
            cut.setdefault(chunk["document_id"], []).append(chunk["content"][start:end])
            blanked[r["chunk_id"]] = _blank(content, start, end)
    for chunk_id in whole:
        if chunk_id in chunks:
            cut.setdefault(chunks[chunk_id]["document_id"], []).append(chunks[chunk_id]["content"])
    entity_ids = [
        r["entity_id"]
        for r in await conn.fetch(
            "SELECT DISTINCT entity_id FROM unit_entities WHERE unit_id = ANY($1::uuid[])",
            all_ids + observations,
        )
    ]
    # Retracted observations: their other evidence is consolidated again.
    await conn.execute(_REQUEUE_EVIDENCE, bank_id, observations, all_ids)
    await conn.execute(
        "DELETE FROM observation_history WHERE bank_id = $1"
        " AND (observation_id = ANY($2::uuid[]) OR fact_ids && $3::uuid[])",
        bank_id,
        observations,
        all_ids,
    )
    await conn.execute(
        "DELETE FROM pending_links WHERE to_unit = ANY($1::uuid[])", all_ids + observations
    )
    # Other facts' versions that quote a forgotten one (a merge survivor keeps the absorbed
    # text) or, for a forget by text, any version holding the text.
    await conn.execute(
        "DELETE FROM memory_versions WHERE bank_id = $1 AND (related_id = ANY($2::uuid[])"
        " OR ($3::text IS NOT NULL AND (previous_text ILIKE $3 OR new_text ILIKE $3)))",
        bank_id,
        all_ids + observations,
        f"%{_escape_like(where.text)}%" if where.text else None,
    )
    await conn.execute(
        "DELETE FROM memory_units WHERE bank_id = $1 AND id = ANY($2::uuid[])",
        bank_id,
        all_ids + observations,
    )
    await drop_access(conn, bank_id, all_ids + observations)  # recall's accesses (migration 0041)
    await conn.execute("DELETE FROM bank_term_stats WHERE bank_id = $1 AND df <= 0", bank_id)
    await conn.execute(DELETE_ORPHAN_ENTITIES, bank_id, entity_ids)
    await conn.execute(
        "DELETE FROM chunks WHERE bank_id = $1 AND chunk_id = ANY($2::text[])",
        bank_id,
        sorted(whole),
    )
    for chunk_id, content in blanked.items():
        await conn.execute(
            "UPDATE chunks SET content = $3 WHERE bank_id = $1 AND chunk_id = $2",
            bank_id,
            chunk_id,
            _blank_all(content, where.text) if where.text else content,
        )
    if where.text:
        await _blank_text_everywhere(conn, bank_id, where.text)
    for document_id, passages in cut.items():
        await _blank_document(conn, bank_id, document_id, passages)
    await conn.execute(
        "DELETE FROM documents d WHERE d.bank_id = $1 AND d.document_id = ANY($2::text[])"
        " AND NOT EXISTS (SELECT 1 FROM memory_units m WHERE m.bank_id = $1"
        " AND m.document_id = d.document_id)",
        bank_id,
        sorted(
            {r["document_id"] for r in selected if r["document_id"]}
            | ({where.document_id} if where.document_id else set())
        ),
    )
    await conn.execute(
        "DELETE FROM staged_facts WHERE bank_id = $1 AND (fact->>'text' = ANY($2::text[])"
        " OR chunk_id = ANY($3::text[]))",
        bank_id,
        list(texts.values()),
        sorted(whole),
    )
    await _drop_from_models(conn, bank_id, models, all_ids + observations)


async def _blank_text_everywhere(conn: Connection, bank_id: str, text: str) -> None:
    pattern = f"%{_escape_like(text)}%"
    for r in await conn.fetch(
        "SELECT chunk_id, content FROM chunks WHERE bank_id = $1 AND content ILIKE $2",
        bank_id,
        pattern,
    ):
        await conn.execute(
            "UPDATE chunks SET content = $3 WHERE bank_id = $1 AND chunk_id = $2",
            bank_id,
            r["chunk_id"],
            _blank_all(r["content"], text),
        )
    for r in await conn.fetch(
        "SELECT document_id FROM documents WHERE bank_id = $1 AND content ILIKE $2",
        bank_id,
        pattern,
    ):
        await _blank_document(conn, bank_id, r["document_id"], [text])


async def _blank_document(
    conn: Connection, bank_id: str, document_id: str, passages: list[str]
) -> None:
    content = await conn.fetchval(
        "SELECT content FROM documents WHERE bank_id = $1 AND document_id = $2",
        bank_id,
        document_id,
    )
    if content is None:
        return
    for passage in passages:
        if passage.strip():
            content = _blank_all(content, passage)
    # content_hash stays the hash of the text as sent: re-sending that text keeps this
    # blanked copy (engine/retain/upsert.py).
    await conn.execute(
        "UPDATE documents SET content = $3, updated_at = now()"
        " WHERE bank_id = $1 AND document_id = $2",
        bank_id,
        document_id,
        content,
    )


async def _drop_from_models(
    conn: Connection, bank_id: str, models: list[str], ids: list[str]
) -> None:
    """Forgotten ids leave `based_on`; a model that cited one loses the content written from
    it (and its versions) until its next refresh."""
    if not models:
        return
    await conn.execute(
        "UPDATE mental_models SET based_on_ids = ARRAY(SELECT unnest(based_on_ids) EXCEPT"
        " SELECT unnest($3::uuid[])),"
        " based_on = coalesce((SELECT jsonb_agg(b) FROM jsonb_array_elements(based_on) b"
        "   WHERE NOT (b->>'id' = ANY($3::text[]))), '[]'::jsonb),"
        " content = '', reflect_response = NULL, evidence_digest = NULL, embedding = NULL,"
        " updated_at = now()"
        " WHERE bank_id = $1 AND id = ANY($2::text[])",
        bank_id,
        models,
        ids,
    )
    await conn.execute(
        "DELETE FROM mental_model_versions WHERE bank_id = $1 AND id = ANY($2::text[])",
        bank_id,
        models,
    )
