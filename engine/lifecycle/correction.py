"""Correcting a fact (PATCH .../memories/{id}) and explicit feedback on it.

A correction is versioned (memory_versions keeps the text, dates, tags and state before it),
re-embedded by the caller (the new embedding and token vectors come in), re-indexed for
BM25, re-linked (its semantic links are recomputed: cosine ≥ 0.7, top 5, as retain does),
and the observations built on the old text are retracted so consolidation rebuilds them from
the corrected fact. Feedback moves importance by a bounded step and records why.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg
import numpy as np
from pgvector import Vector

from engine.db import Connection
from engine.errors import InvalidInput, NotFound
from engine.lifecycle.access_state import fold
from engine.lifecycle.relink import names_for_text, replace_entities
from engine.lifecycle.versions import record_version
from engine.store.backlog import requeue, requeue_statement
from engine.store.document_history import EventKind, record_event
from engine.text import TERMS_VERSION, term_frequencies

STATES = ("active", "archived", "superseded")
SIGNALS = ("useful", "not_useful", "wrong")
SEMANTIC_LINK_FLOOR = 0.7
SEMANTIC_LINKS = 5

UNSET: Any = object()


@dataclass(frozen=True)
class Reembedding:
    embedding: np.ndarray[Any, Any]
    token_vectors: bytes | None


@dataclass(frozen=True)
class Correction:
    text: str | None = None
    context: str | None = None
    fact_type: str | None = None
    tags: list[str] | None = None
    state: str | None = None
    reason: str = ""
    entities: list[str] | None = None  # replaces the fact's entities ([] detaches all)
    # Resolve names as retain does (relink.py); a new text without `entities` is resolved too.
    resolve_entities: bool = True
    # Dates: UNSET leaves them, None clears them.
    occurred_start: datetime | None = UNSET
    occurred_end: datetime | None = UNSET

    def validated(self) -> Correction:
        if self.text is not None and not self.text.strip():
            raise InvalidInput("text", "must not be empty")
        if self.fact_type is not None and self.fact_type not in ("world", "experience"):
            raise InvalidInput("fact_type", "must be world or experience")
        if self.state is not None and self.state not in STATES:
            raise InvalidInput("state", f"must be one of {', '.join(STATES)}")
        changes = (self.text, self.context, self.fact_type, self.tags, self.state, self.entities)
        dates = (self.occurred_start, self.occurred_end)
        if all(v is None for v in changes) and all(v is UNSET for v in dates):
            raise InvalidInput(
                "text",
                "give at least one of text, context, dates, fact_type, tags, state or entities",
            )
        return self


_CURRENT = """
SELECT id::text AS id, text, context, fact_type, tags, state, occurred_start, occurred_end,
       document_id, coalesce(mentioned_at, created_at) AS seen
FROM memory_units WHERE bank_id = $1 AND id = $2 FOR UPDATE
"""

_UPDATE = """
UPDATE memory_units SET text = $3, context = $4, fact_type = $5, tags = $6, state = $7,
    occurred_start = $8, occurred_end = $9, needs_correction = false, updated_at = now(),
    valid_to = CASE WHEN $7 = 'active' THEN NULL ELSE valid_to END,
    superseded_by = CASE WHEN $7 = 'active' THEN NULL ELSE superseded_by END
WHERE id = $2 AND bank_id = $1
"""

_RELINK = """
WITH dropped AS (
    DELETE FROM memory_links WHERE link_type = 'semantic' AND (from_unit = $2 OR to_unit = $2)
), near AS (
    SELECT m.id, 1 - (m.embedding <=> $3) AS similarity FROM memory_units m
    WHERE m.bank_id = $1 AND m.id <> $2 AND m.fact_type <> 'observation'
    ORDER BY m.embedding <=> $3 LIMIT $5
)
INSERT INTO memory_links (bank_id, from_unit, to_unit, link_type, weight)
SELECT $1, $2, id, 'semantic', similarity FROM near WHERE similarity >= $4
ON CONFLICT DO NOTHING
"""

# The observations built from the fact go; all their evidence waits for consolidation again.
_REQUEUE_DERIVED = requeue_statement(
    "m.bank_id = $1 AND m.id IN (SELECT e.fact_id FROM observation_evidence e"
    " WHERE e.observation_id IN (SELECT observation_id FROM observation_evidence"
    " WHERE fact_id = $2))"
)
_RETRACT_DERIVED = """
DELETE FROM memory_units WHERE bank_id = $1
  AND id IN (SELECT observation_id FROM observation_evidence WHERE fact_id = $2)
"""


async def correct_memory(
    conn: Connection,
    bank_id: str,
    memory_id: str,
    change: Correction,
    reembedded: Reembedding | None = None,
) -> None:
    """Apply a correction in one transaction; `reembedded` is required when the text changes."""
    change = change.validated()
    async with conn.transaction():
        try:
            row = await conn.fetchrow(_CURRENT, bank_id, memory_id)
        except asyncpg.DataError as exc:
            raise NotFound("memory", memory_id) from exc
        if row is None:
            raise NotFound("memory", memory_id)
        if row["fact_type"] == "observation":
            raise InvalidInput("memory_id", "observations are derived; correct their facts")
        text = change.text.strip() if change.text is not None else row["text"]
        start = row["occurred_start"] if change.occurred_start is UNSET else change.occurred_start
        end = row["occurred_end"] if change.occurred_end is UNSET else change.occurred_end
        if start is not None and end is not None and end < start:
            raise InvalidInput("occurred_end", "is before occurred_start")
        state = change.state or row["state"]
        await conn.execute(
            _UPDATE,
            bank_id,
            memory_id,
            text,
            row["context"] if change.context is None else change.context,
            change.fact_type or row["fact_type"],
            row["tags"] if change.tags is None else sorted(set(change.tags)),
            state,
            start,
            end,
        )
        text_changed = text != row["text"]
        if text_changed:
            if reembedded is None:
                raise InvalidInput("text", "a new text needs its embedding")
            await _reindex(conn, bank_id, memory_id, text, reembedded)
        if text_changed or change.state is not None:
            await conn.execute(_REQUEUE_DERIVED, bank_id, memory_id)
            await conn.execute(_RETRACT_DERIVED, bank_id, memory_id)
        names = change.entities
        if names is None and text_changed and change.resolve_entities:
            names = await names_for_text(conn, memory_id, row["text"], text)
        entities: dict[str, list[str]] = {}
        if names is not None:
            before, after = await replace_entities(
                conn, bank_id, memory_id, names, change.resolve_entities, row["seen"]
            )
            if before != after:
                entities = {"entity_ids": before}
        await record_version(
            conn,
            bank_id,
            memory_id,
            "corrected",
            previous_text=row["text"],
            new_text=text,
            previous={
                "context": row["context"],
                "fact_type": row["fact_type"],
                "tags": list(row["tags"]),
                "state": row["state"],
                "occurred_start": row["occurred_start"],
                "occurred_end": row["occurred_end"],
                **entities,
            },
            reason=change.reason,
        )
        if row["document_id"] is not None:
            await record_event(
                conn,
                bank_id,
                _event_kind(row["state"], state),
                None,
                {row["document_id"]: 0},
                fact_id=memory_id,
            )


def _event_kind(before: str, after: str) -> EventKind:
    """How a document's history names a correction of one of its facts."""
    if after != before and after == "active":
        return "fact_restored"
    if after != before and before == "active":
        return "fact_invalidated"
    return "fact_edited"


async def _reindex(
    conn: Connection, bank_id: str, memory_id: str, text: str, reembedded: Reembedding
) -> None:
    tf, length = term_frequencies(text)
    vector = Vector(np.asarray(reembedded.embedding, dtype=np.float32))
    # The fact row is locked already (_CURRENT), so its old length read here is the one the
    # bank's statistics counted; BM25's average length stays exact.
    previous = await conn.fetchval("SELECT token_count FROM memory_units WHERE id = $1", memory_id)
    await requeue(conn, bank_id, [memory_id])
    await conn.execute(
        "UPDATE memory_units SET embedding = $2, token_vectors = $3, token_count = $4,"
        " terms_version = $5 WHERE id = $1",
        memory_id,
        vector,
        reembedded.token_vectors,
        length,
        TERMS_VERSION,
    )
    await conn.execute(
        "UPDATE bank_stats SET total_terms = total_terms + $2 WHERE bank_id = $1",
        bank_id,
        length - (previous or 0),
    )
    await conn.execute("DELETE FROM memory_terms WHERE unit_id = $1", memory_id)
    await conn.execute(
        "INSERT INTO memory_terms (bank_id, term, unit_id, tf)"
        " SELECT $1, t.term, $2, t.tf FROM unnest($3::text[], $4::int[]) AS t(term, tf)",
        bank_id,
        memory_id,
        list(tf),
        list(tf.values()),
    )
    await conn.execute("DELETE FROM bank_term_stats WHERE bank_id = $1 AND df <= 0", bank_id)
    await conn.execute(_RELINK, bank_id, memory_id, vector, SEMANTIC_LINK_FLOOR, SEMANTIC_LINKS)


@dataclass(frozen=True)
class FeedbackResult:
    importance_before: float
    importance_after: float
    needs_correction: bool


async def record_feedback(
    conn: Connection, bank_id: str, memory_id: str, signal: str, reason: str, step: float
) -> FeedbackResult:
    """useful: importance + step; not_useful: − step; wrong: − step and marked for
    correction. Bounded to [0, 1]; strength moves with importance."""
    if signal not in SIGNALS:
        raise InvalidInput("signal", f"must be one of {', '.join(SIGNALS)}")
    delta = step if signal == "useful" else -step
    async with conn.transaction():
        try:
            row = await conn.fetchrow(
                "SELECT importance, needs_correction FROM memory_units"
                " WHERE bank_id = $1 AND id = $2 FOR UPDATE",
                bank_id,
                memory_id,
            )
        except asyncpg.DataError as exc:
            raise NotFound("memory", memory_id) from exc
        if row is None:
            raise NotFound("memory", memory_id)
        before = float(row["importance"])
        after = round(min(1.0, max(0.0, before + delta)), 4)
        wrong = bool(row["needs_correction"]) or signal == "wrong"
        await fold(conn, bank_id, [memory_id])  # strength moves from its reinforced value
        await conn.execute(
            "UPDATE memory_units SET importance = $3,"
            " strength = least(1, greatest(0, strength + ($3 - importance))),"
            " needs_correction = $4 WHERE bank_id = $1 AND id = $2",
            bank_id,
            memory_id,
            after,
            wrong,
        )
        await conn.execute(
            "INSERT INTO memory_feedback (bank_id, memory_id, signal, reason, importance_before,"
            " importance_after) VALUES ($1, $2, $3, $4, $5, $6)",
            bank_id,
            memory_id,
            signal,
            reason,
            before,
            after,
        )
        await record_version(
            conn,
            bank_id,
            memory_id,
            "feedback",
            previous={"importance": before},
            reason=f"{signal}: {reason}" if reason else signal,
        )
    return FeedbackResult(before, after, wrong)
