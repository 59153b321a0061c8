"""Tombstones at retain time: what was forgotten is not stored again (docs/lifecycle.md).

Called by the upsert step with the document's new chunks and staged facts: a chunk whose
fingerprint is tombstoned is not stored, nor are its facts; a fact whose text hash is
tombstoned is not stored, and its source span is blanked in the chunk (or, without a span,
the chunk is not stored), so the chunk text does not bring it back either.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import asyncpg

from engine.db import Connection
from engine.retain.payloads import ChunkJob


def blank_passages(content: str, passages: Sequence[str]) -> str:
    """Spaces over every occurrence of each passage (offsets of the rest stay valid)."""
    for passage in passages:
        if passage.strip():
            content = content.replace(passage, " " * len(passage))
    return content


def text_hash(text: str) -> str:
    """The tombstone of a fact's text: whitespace and case do not matter."""
    return hashlib.sha256(" ".join(text.split()).casefold().encode()).hexdigest()


_TOMBSTONED = """
SELECT kind, content_hash FROM tombstones
WHERE bank_id = $1 AND ((kind = 'chunk' AND content_hash = ANY($2::text[]))
                        OR (kind = 'fact' AND content_hash = ANY($3::text[])))
"""


@dataclass(frozen=True)
class Tombstoned:
    chunks: list[ChunkJob]
    staged: list[asyncpg.Record]
    passages: list[str]
    entity_ids: list[Any]


@dataclass(frozen=True)
class Tombstones:
    """The tombstoned fingerprints among a batch's chunks and facts."""

    chunks: frozenset[str] = frozenset()
    facts: frozenset[str] = frozenset()


async def find_tombstones(
    conn: Connection, bank_id: str, chunks: Sequence[ChunkJob], staged: Sequence[asyncpg.Record]
) -> Tombstones:
    """One look-up for a whole batch of documents' chunks and staged facts."""
    hashes = sorted({text_hash(row["text"]) for row in staged})
    found = await conn.fetch(_TOMBSTONED, bank_id, [c.content_hash for c in chunks], hashes)
    return Tombstones(
        frozenset(r["content_hash"] for r in found if r["kind"] == "chunk"),
        frozenset(r["content_hash"] for r in found if r["kind"] == "fact"),
    )


def apply_tombstones(
    found: Tombstones, chunks: Sequence[ChunkJob], staged: Sequence[asyncpg.Record]
) -> Tombstoned:
    """The chunks and staged facts of one document to store, the passages to blank in the
    document's text and the entities of the facts left out (removed if nothing else mentions
    them). `staged` rows have fact_id, text, chunk_id, source_start, source_end, entity_ids."""
    if not found.chunks and not found.facts:
        return Tombstoned(list(chunks), list(staged), [], [])
    hashes = {row["fact_id"]: text_hash(row["text"]) for row in staged}
    dead_chunks, dead_facts = found.chunks, found.facts
    dropped = {c.chunk_id for c in chunks if c.content_hash in dead_chunks}
    spans: dict[str, list[tuple[int, int]]] = {}
    for row in staged:
        if hashes[row["fact_id"]] not in dead_facts:
            continue
        start, end = row["source_start"], row["source_end"]
        if start is None or end is None:
            dropped.add(row["chunk_id"])
        else:
            spans.setdefault(row["chunk_id"], []).append((start, end))
    kept: list[ChunkJob] = []
    passages: list[str] = []
    for chunk in chunks:
        if chunk.chunk_id in dropped:
            passages.append(chunk.text)
            continue
        text = chunk.text
        for start, stop in spans.get(chunk.chunk_id, []):
            end = min(stop, len(text))
            passages.append(chunk.text[start:end])
            text = text[:start] + " " * max(0, end - start) + text[end:]
        kept.append(replace(chunk, text=text) if text != chunk.text else chunk)
    stored = [
        row
        for row in staged
        if row["chunk_id"] not in dropped and hashes[row["fact_id"]] not in dead_facts
    ]
    stored_ids = {row["fact_id"] for row in stored}
    left_out = [
        e for row in staged if row["fact_id"] not in stored_ids for e in (row["entity_ids"] or [])
    ]
    return Tombstoned(kept, stored, passages, sorted(set(left_out)))
