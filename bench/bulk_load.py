"""A bulk loader for bench/recall_million.py (`--bulk`): the rows retain writes, by COPY.

This is a loader for a benchmark database, not Engram's write path: its rate says how fast a
test database of a million facts is built, not how fast Engram stores memories (the retain
and import benches measure that). It writes what `store_document` in bench/recall_latency.py
(stage → embed → entities → link → upsert) writes for the same synthetic documents, with the
engine's own functions for every row's content:

- fact ids: `engine.retain.staging.fact_id` (the same ids as the engine path, so the two can
  be compared row by row); importance: `fact_to_json` (the local score); BM25 terms and token
  counts: `engine.text.term_frequencies`; token vectors: `encode_token_vectors` (int4);
  entity ids: `engine.retain.resolve.entity_id`; document rows: the upsert step's own
  `_document_row` with its document and chunk SQL; bank and term statistics: the schema's own
  triggers, which COPY fires.
- links: `engine.retain.links.plan_links`, the link step's selection and weights, given the
  same inputs the link step reads from the database, computed here from what the loader has
  stored so far in the bank (every document is linked against the bank's earlier documents,
  as a build with one document in flight is). Two inputs are computed differently: the
  stored semantic neighbours are exact nearest neighbours (brute force below
  BRUTE_FORCE_BELOW stored facts; above it, among the copies of the NEAREST_POOL pool entries
  nearest the fact's own, which is where a pooled vector's neighbours are, see
  bench/recall_million.py) where the engine walks the HNSW index; and ties in event time are
  broken by the id's first 8 bytes.

Not done here: local supersession (engine/lifecycle/detect.py) that the upsert step runs;
the comparison in docs/benchmarks.md says how many facts it touches on the engine path.

Speed: the link and term tables' primary keys, secondary indexes and foreign keys, and the
HNSW index, are dropped before the load and rebuilt after it (bench/bulk_indexes.py); each
bank is loaded in one transaction (a bank stopped half-way is rolled back and
loaded again).
"""

from __future__ import annotations

import bisect
import json
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import asyncpg
import numpy as np
from numpy.typing import NDArray
from pgvector.asyncpg import register_vector

from bench.recall_latency import FACTS_PER_CHUNK, chunks_of
from bench.synthetic_facts import SyntheticFact
from engine.db import Connection
from engine.entities import normalize_name
from engine.lifecycle.importance import local_importance
from engine.recall.vectors import encode_token_vectors
from engine.retain.links import (
    ENTITY_K,
    SEMANTIC_K,
    TEMPORAL_K,
    TEMPORAL_WINDOW,
    Link,
    LinkInputs,
    StagedFact,
    plan_links,
    temporal_weight,
)
from engine.retain.payloads import DocumentPlan, LinkOptions, RetainItem, UpsertDocument
from engine.retain.resolve import entity_id
from engine.retain.staging import fact_id
from engine.retain.upsert import _CHUNKS, _DOCUMENT, _document_row
from engine.text import term_frequencies
from engine.types import ExtractedFact

FloatMatrix = NDArray[np.float32]

BRUTE_FORCE_BELOW: Final = 5_000
NEAREST_POOL: Final = 16
COPY_EVERY: Final = 200  # documents per COPY round
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND: Final = timedelta(microseconds=1)

_DETAIL_KEYS: Final = ("who", "what", "where", "when", "why")


def _micros(at: datetime) -> int:
    return (at - _EPOCH) // _MICROSECOND


class PoolVectors:
    """The pooled vectors (bench/recall_million.py `PooledEmbedder`), with what the loader
    needs besides: each text's pool entry and the entries nearest each entry."""

    def __init__(self, vectors: FloatMatrix, tokens: list[FloatMatrix], pick: Any) -> None:
        self.vectors = vectors
        self.pick = pick  # text -> (entry, unit vector), the embedder's own choice
        self.blobs = [encode_token_vectors(t) for t in tokens]
        similarity = vectors @ vectors.T
        self.nearest = np.argsort(-similarity, axis=1)[:, :NEAREST_POOL]


@dataclass
class BankState:
    """What linking needs of a bank's stored facts, kept as the bank is loaded."""

    capacity: int
    dimension: int
    vectors: FloatMatrix = field(init=False)
    ids: list[str] = field(default_factory=list)
    by_entry: dict[int, list[int]] = field(default_factory=dict)
    times: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    keys: NDArray[np.uint64] = field(default_factory=lambda: np.zeros(0, np.uint64))
    rows: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    mentions: dict[str, int] = field(default_factory=dict)
    recent: dict[str, list[tuple[int, str]]] = field(default_factory=dict)  # (-time, id)
    entities: dict[str, list[Any]] = field(default_factory=dict)
    names: dict[str, tuple[str, str]] = field(default_factory=dict)  # name -> (key, entity id)

    def __post_init__(self) -> None:
        self.vectors = np.zeros((self.capacity, self.dimension), np.float32)


def _key(fid: str) -> int:
    return int.from_bytes(uuid.UUID(fid).bytes[:8], "big")


def _top(similarities: FloatMatrix) -> NDArray[np.intp]:
    """Per row, the columns of the SEMANTIC_K largest values, largest first."""
    if similarities.shape[1] > SEMANTIC_K:
        part = np.argpartition(-similarities, SEMANTIC_K - 1, axis=1)[:, :SEMANTIC_K]
    else:
        part = np.broadcast_to(np.arange(similarities.shape[1]), similarities.shape)
    values = np.take_along_axis(similarities, part, axis=1)
    order = np.argsort(-values, axis=1, kind="stable")
    return np.asarray(np.take_along_axis(part, order, axis=1))


def _stored_semantic(
    state: BankState, pool: PoolVectors, entries: list[int], matrix: FloatMatrix, ids: list[str]
) -> dict[str, list[Link]]:
    stored = len(state.ids)
    if stored == 0:
        return {}
    out: dict[str, list[Link]] = {}
    if stored < BRUTE_FORCE_BELOW:
        sims = matrix @ state.vectors[:stored].T
        for i, columns in enumerate(_top(sims)):
            out[ids[i]] = [Link(state.ids[j], "semantic", float(sims[i, j])) for j in columns]
        return out
    for i, fid in enumerate(ids):
        rows = [r for e in pool.nearest[entries[i]] for r in state.by_entry.get(int(e), ())]
        if not rows:
            continue
        candidates = np.asarray(rows)
        sims = (state.vectors[candidates] @ matrix[i])[None, :]
        out[fid] = [
            Link(state.ids[candidates[j]], "semantic", float(sims[0, j])) for j in _top(sims)[0]
        ]
    return out


def _stored_temporal(
    state: BankState, ids: list[str], ats: list[datetime]
) -> dict[str, list[Link]]:
    """The link step's temporal query (the nearest TEMPORAL_K at or before, and after, within
    the window, ties by id) and `_nearest_in_time` over its rows."""
    window = TEMPORAL_WINDOW // _MICROSECOND
    out: dict[str, list[Link]] = {}
    times, rows = state.times, state.rows
    for fid, at in zip(ids, ats, strict=True):
        t = _micros(at)
        found: list[tuple[int, str, int]] = []
        # At or before, latest first, then smallest id: walk back one time group at a time.
        hi = int(np.searchsorted(times, t, "right"))
        low = int(np.searchsorted(times, t - window, "left"))
        while hi > low and len(found) < TEMPORAL_K:
            group = int(np.searchsorted(times, times[hi - 1], "left"))
            group = max(group, low)
            for r in rows[group : min(hi, group + TEMPORAL_K - len(found))]:
                found.append((abs(t - int(times[hi - 1])), state.ids[r], int(times[hi - 1])))
            hi = group
        start = int(np.searchsorted(times, t, "right"))
        for k in range(start, min(start + TEMPORAL_K, len(times))):
            if times[k] > t + window:
                break
            found.append((int(times[k]) - t, state.ids[rows[k]], int(times[k])))
        if found:
            found.sort()
            out[fid] = [
                Link(uid, "temporal", temporal_weight(at, _from_micros(when)))
                for _, uid, when in found[:TEMPORAL_K]
            ]
    return out


def _from_micros(value: int) -> datetime:
    return _EPOCH + value * _MICROSECOND


@dataclass
class Rows:
    """Rows waiting for the next COPY round."""

    units: list[tuple[Any, ...]] = field(default_factory=list)
    terms: list[tuple[Any, ...]] = field(default_factory=list)
    links: list[tuple[Any, ...]] = field(default_factory=list)
    mentions: list[tuple[Any, ...]] = field(default_factory=list)
    documents: list[UpsertDocument] = field(default_factory=list)


_UNIT_COLUMNS: Final = (
    "id", "bank_id", "document_id", "chunk_id", "fact_type", "text", "context", "details",
    "occurred_start", "occurred_end", "mentioned_at", "metadata", "tags", "source_start",
    "source_end", "embedding", "token_count", "token_vectors", "importance", "strength",
    "valid_from",
)  # fmt: skip


def _unit_row(
    bank: str, chunk: Any, fid: str, fact: ExtractedFact, vector: FloatMatrix, blob: bytes,
    length: int,
) -> tuple[Any, ...]:  # fmt: skip
    """The row upsert's `_UNITS` statement makes of a staged fact (engine/retain/upsert.py):
    importance as staging scores it (`fact_to_json`: the local score when the extractor gave
    none), `details` the non-empty ones of who/what/where/when/why."""
    if fact.importance is None:
        importance = local_importance(fact.text, len(fact.entities))
    else:
        importance = fact.importance
    details = {
        k: v for k in _DETAIL_KEYS if (v := getattr(fact, k)) is not None and v not in ("", [])
    }
    stamps = [t for t in (fact.occurred_start, chunk.mentioned_at) if t is not None]
    return (
        fid, bank, chunk.document_id, chunk.chunk_id, fact.fact_type, fact.text,
        chunk.context or "", details, fact.occurred_start, fact.occurred_end,
        chunk.mentioned_at, chunk.metadata or {}, list(chunk.tags), fact.source_start,
        fact.source_end, vector, length, blob, importance, importance,
        min(stamps) if stamps else None,
    )  # fmt: skip


def add_document(
    state: BankState, pool: PoolVectors, bank: str, document_id: str,
    facts: Sequence[SyntheticFact], rows: Rows,
) -> None:  # fmt: skip
    """One document's rows, linked against the bank's stored facts; then it counts as stored."""
    chunks = chunks_of(bank, document_id, list(facts))
    staged: list[StagedFact] = []
    vectors: list[FloatMatrix] = []
    entries: list[int] = []
    seen = facts[0].mentioned_at
    for number, chunk in enumerate(chunks):
        for index, synthetic in enumerate(facts[number * FACTS_PER_CHUNK :][:FACTS_PER_CHUNK]):
            fact = synthetic.fact
            fid = fact_id(bank, chunk, "local", index)
            entry, vector = pool.pick(fact.text)
            tf, length = term_frequencies(fact.text)
            eids: list[str] = []
            for entity in fact.entities:
                if entity.name not in state.names:
                    key = normalize_name(entity.name)
                    state.names[entity.name] = (key, entity_id(bank, key))
                key, eid = state.names[entity.name]
                state.entities.setdefault(eid, [eid, bank, entity.name, key, entity.kind, 0, seen])
                if eid not in eids:
                    eids.append(eid)
            at = fact.occurred_start or chunk.mentioned_at
            staged.append(StagedFact(fid, chunk.chunk_id, index, at, tuple(eids), frozenset()))
            vectors.append(vector)
            entries.append(entry)
            rows.units.append(_unit_row(bank, chunk, fid, fact, vector, pool.blobs[entry], length))
            rows.terms += [(bank, term, fid, count) for term, count in tf.items()]
            rows.mentions += [(fid, eid, bank) for eid in eids]
    ids = [f.fact_id for f in staged]
    # The values stored (memory_units.embedding is halfvec, migration 0026), in float32 as the
    # link step multiplies them for a batch's peers; pgvector's cosine against stored facts
    # divides by the norms, which float16 rounding moved off 1: the same links as retain's.
    matrix = np.stack(vectors).astype(np.float16).astype(np.float32)
    unit = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
    ats: list[datetime] = [f.at for f in staged if f.at is not None]
    neighbours = {
        eid: (state.mentions[eid], [uid for _, uid in state.recent[eid]])
        for f in staged
        for eid in f.entity_ids
        if state.mentions.get(eid)
    }
    inputs = LinkInputs(
        staged,
        len(staged),
        matrix,
        _stored_semantic(state, pool, entries, unit, ids),
        _stored_temporal(state, [f.fact_id for f in staged if f.at is not None], ats),
        neighbours,
        LinkOptions(bank, f"bench-{document_id}", ids),
    )
    for linked, kept in zip(staged, plan_links(inputs), strict=True):
        source = linked.fact_id
        rows.links += [(bank, source, k.to_unit, k.link_type, k.weight) for k in kept]
    content = "\n\n".join(c.text for c in chunks)
    item = RetainItem(content=content, timestamp=seen)
    plan = DocumentPlan(document_id, chunks, [], [])
    rows.documents.append(UpsertDocument(bank, f"bench-{document_id}", plan, [item]))
    _remember(state, staged, unit, entries)


def _remember(
    state: BankState, staged: list[StagedFact], matrix: FloatMatrix, entries: list[int]
) -> None:
    first = len(state.ids)
    state.vectors[first : first + len(staged)] = matrix
    timed: list[tuple[int, int, int]] = []
    for offset, fact in enumerate(staged):
        row = first + offset
        state.ids.append(fact.fact_id)
        state.by_entry.setdefault(entries[offset], []).append(row)
        for eid in fact.entity_ids:
            state.mentions[eid] = state.mentions.get(eid, 0) + 1
            state.entities[eid][5] += 1
        if fact.at is None:  # never, for synthetic facts; the queries put these last
            continue
        t = _micros(fact.at)
        timed.append((t, _key(fact.fact_id), row))
        for eid in fact.entity_ids:
            state.entities[eid].append(fact.at)  # last_seen candidates, see entity_rows
            recent = state.recent.setdefault(eid, [])
            bisect.insort(recent, (-t, fact.fact_id))
            del recent[ENTITY_K:]
    timed.sort()
    positions = []
    for t, key, _ in timed:
        low = int(np.searchsorted(state.times, t, "left"))
        high = int(np.searchsorted(state.times, t, "right"))
        positions.append(low + int(np.searchsorted(state.keys[low:high], np.uint64(key))))
    state.times = np.insert(state.times, positions, [t for t, _, _ in timed])
    state.keys = np.insert(state.keys, positions, np.array([k for _, k, _ in timed], np.uint64))
    state.rows = np.insert(state.rows, positions, [r for _, _, r in timed])


def entity_rows(state: BankState) -> list[tuple[Any, ...]]:
    """Entities as the upsert step leaves them: first seen when the first document naming
    them was stored, last seen at the latest event of a fact naming them, counted."""
    out: list[tuple[Any, ...]] = []
    for record in state.entities.values():
        eid, bank, name, key, kind, count, first, *events = record
        out.append((eid, bank, name, key, kind, count, first, max([first, *events])))
    return out


_ENTITY_COLUMNS: Final = (
    "id", "bank_id", "canonical_name", "normalized_name", "kind", "mention_count",
    "first_seen", "last_seen",
)  # fmt: skip


async def _copy(conn: Connection, rows: Rows) -> None:
    chunks: list[Any] = []
    await conn.executemany(_DOCUMENT, [_document_row(job, []) for job in rows.documents])
    for job in rows.documents:
        chunks += [(c, i) for i, c in enumerate(job.plan.new_chunks)]
    bank = rows.documents[0].bank_id
    await conn.execute(
        _CHUNKS,
        bank,
        [c.chunk_id for c, _ in chunks],
        [c.document_id for c, _ in chunks],
        [i for _, i in chunks],
        [c.text for c, _ in chunks],
        [c.content_hash for c, _ in chunks],
        [c.char_start for c, _ in chunks],
        [c.char_end for c, _ in chunks],
    )
    await conn.copy_records_to_table("memory_units", records=rows.units, columns=_UNIT_COLUMNS)
    await conn.copy_records_to_table(
        "memory_terms", records=rows.terms, columns=("bank_id", "term", "unit_id", "tf")
    )
    await conn.copy_records_to_table(
        "unit_entities", records=rows.mentions, columns=("unit_id", "entity_id", "bank_id")
    )
    await conn.copy_records_to_table(
        "memory_links",
        records=rows.links,
        columns=("bank_id", "from_unit", "to_unit", "link_type", "weight"),
    )


def _jsonb_binary(value: object) -> bytes:
    return b"\x01" + json.dumps(value, separators=(",", ":"), default=str).encode()


def _jsonb_read(data: bytes) -> object:
    return json.loads(data[1:])


async def loader_connection(database_url: str) -> Connection:
    """A connection of its own for the loader: COPY's binary format needs a binary jsonb
    codec, which the engine's pool connections (text jsonb) do not have."""
    conn: asyncpg.Connection = await asyncpg.connect(database_url)
    await register_vector(conn)
    await conn.set_type_codec(
        "jsonb",
        encoder=_jsonb_binary,
        decoder=_jsonb_read,
        schema="pg_catalog",
        format="binary",
    )
    return conn


async def load_bank(
    conn: Connection,
    vectors: PoolVectors,
    bank: str,
    facts: list[SyntheticFact],
    document: int,
    stop_at: float = float("inf"),
) -> int:
    """Store a bank's documents (`document` facts each), COPY_EVERY documents a transaction,
    the entities with the last; returns the facts stored now. A bank stopped part-way
    continues: the documents it stored are replayed into the linking state (not written
    again), since what is stored is a function of the facts alone. Past `stop_at`
    (time.perf_counter) it stops after the next COPY round."""
    documents = -(-len(facts) // document)
    stored = int(
        await conn.fetchval("SELECT count(*) FROM documents WHERE bank_id = $1", bank) or 0
    )
    if stored == documents:
        return 0
    state = BankState(len(facts), vectors.vectors.shape[1])
    rows = Rows()
    for index in range(documents):
        part = facts[index * document : (index + 1) * document]
        add_document(state, vectors, bank, f"doc-{index:06d}", part, rows)
        if index < stored:
            rows = Rows()
            continue
        last = index == documents - 1
        if len(rows.documents) >= COPY_EVERY or last:
            # The bank's entities as of this round go with it: a run stopped after it leaves
            # no mention without its entity.
            async with conn.transaction():
                await _copy(conn, rows)
                await conn.execute("DELETE FROM entities WHERE bank_id = $1", bank)
                await conn.copy_records_to_table(
                    "entities", records=entity_rows(state), columns=_ENTITY_COLUMNS
                )
            rows = Rows()
            if time.perf_counter() > stop_at:
                return (index + 1 - stored) * document
    return len(facts) - stored * document
