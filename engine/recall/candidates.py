"""Reading what recall returns: fused candidates' rows, their entities and chunks."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from concurrent.futures import Executor
from datetime import datetime, timedelta
from functools import partial

import asyncpg
import numpy as np

from engine.db import Connection, Pool
from engine.lifecycle.access_state import JOIN, STRENGTH
from engine.recall.budget import estimate_tokens, fill_budget
from engine.recall.context import NEIGHBOURS_SQL, Around, around_of
from engine.recall.context_memory import HELD_GAP, held_neighbours
from engine.recall.graph_memory import BankGraph
from engine.recall.token_cache import TokenVectorCache
from engine.recall.types import BlobCounts, CandidateRow, RecalledMemory, RecallRequest

_ROWS = f"""
SELECT m.id::text AS id, m.fact_type, m.text, m.context, m.occurred_start, m.occurred_end,
       m.mentioned_at, m.document_id, m.chunk_id, m.metadata, m.tags, m.proof_count,
       CASE WHEN $4 THEN m.embedding END AS embedding, m.updated_at AS version,
       n.entities, n.entity_ids,
       m.importance, {STRENGTH} AS strength, m.state,
       coalesce(m.valid_from, m.created_at) AS valid_from, m.valid_to,
       m.superseded_by::text AS superseded_by,
       coalesce(m.mentioned_at, m.created_at) AS known_at
FROM memory_units m {JOIN}
CROSS JOIN LATERAL (
    SELECT coalesce(array_agg(e.canonical_name ORDER BY e.canonical_name, e.id), '{{}}')
               AS entities,
           coalesce(array_agg(e.id::text ORDER BY e.canonical_name, e.id), '{{}}') AS entity_ids
    FROM unit_entities ue JOIN entities e ON e.id = ue.entity_id
    WHERE $3 AND ue.unit_id = m.id
) n
WHERE m.bank_id = $1 AND m.id = ANY($2::uuid[])
"""

# Token vectors are read last, once per fact, and only those the cache lacks.
_TOKEN_VECTORS = """
SELECT id::text AS id, updated_at AS version, token_vectors FROM memory_units
WHERE bank_id = $1 AND id = ANY($2::uuid[]) AND token_vectors IS NOT NULL
"""

# A bank's token vectors, to fill the cache ahead of recalls (warm_token_cache): its active
# facts, what recall shows by default (in no order: sorting them would spill the blobs).
_WARM = """
SELECT id::text AS id, updated_at AS version, token_vectors FROM memory_units
WHERE bank_id = $1 AND state = 'active' AND token_vectors IS NOT NULL
"""
WARM_BATCH = 2000

# Observations (engine/consolidation) record the facts they rest on; only observations are
# looked up, so banks without consolidation never touch the table.
_EVIDENCE = """
SELECT observation_id::text AS observation_id, fact_id::text AS fact_id
FROM observation_evidence
WHERE observation_id = ANY($1::uuid[]) AND stance = 'supports'
ORDER BY observation_id, evidence_at DESC NULLS LAST, fact_id
"""

_CHUNKS = """
SELECT chunk_id, content, chunk_index FROM chunks
WHERE bank_id = $1 AND chunk_id = ANY($2::text[])
"""


async def _fetch(pool: Pool, sql: str, *args: object) -> list[asyncpg.Record]:
    async with pool.acquire() as conn:
        return await conn.fetch(sql, *args)


async def fetch_rows(
    pool: Pool,
    bank_id: str,
    ids: Sequence[str],
    *,
    token_vectors: bool,
    entities: bool,
    neighbours: int = 0,
    neighbour_chunks: int = 0,
    conversation_gap: timedelta = timedelta(0),
    conversation_scan: int = 0,
    cache: TokenVectorCache | None = None,
    counts: BlobCounts | None = None,
    held: BankGraph | None = None,
    cpu: Executor | None = None,
) -> list[CandidateRow]:
    """The rows of `ids`, in the order given (ids that vanished meanwhile are left out), with
    the token vectors of up to `neighbours` facts around each in its conversation, at most
    `neighbour_chunks` chunks away on its timeline (engine/recall/context.py: other documents
    count within `conversation_gap`, `conversation_scan` of them read per side).

    Three reads at once, on three connections: the rows, the neighbours (unless the held bank
    answers, below), and the token vectors of the candidates `cache` holds in no version.
    Then one more for the token vectors of the neighbours (and of any candidate whose cached
    version turned out stale). Measured at 80 candidates: rows and neighbours at once 5.5 ms
    instead of 8.9 ms one after the other.

    `held`: the bank held in memory (engine/recall/graph_cache.py, exact at the recall's
    start); when it has every candidate their embeddings are taken from it, the same float16
    values, instead of being read and decoded with the rows, and their neighbours are found
    in it (engine/recall/context_memory.py, in `cpu` beside the rows' read) instead of by
    the statement."""
    ids = list(ids)
    counts = counts if counts is not None else BlobCounts()
    facts = held.facts if held is not None else None
    whole = facts is not None and bool(ids) and all(i in facts.index for i in ids)
    held_vectors = (
        facts.embeddings[[facts.index[i] for i in ids]].astype(np.float32)
        if facts is not None and whole
        else None
    )
    rows_read = asyncio.ensure_future(
        _fetch(pool, _ROWS, bank_id, ids, entities, held_vectors is None)
    )
    around: asyncio.Future[Around | None] | asyncio.Task[Around] | None = None
    if token_vectors and neighbours > 0:
        if held is not None and whole and cpu is not None and conversation_gap < HELD_GAP:
            find = partial(
                held_neighbours,
                held.timeline,
                held.dates,
                held.facts.ids,
                held.facts.index,
                ids,
                neighbours=neighbours,
                chunks=neighbour_chunks,
                gap=conversation_gap,
                scan=conversation_scan,
            )
            around = asyncio.get_running_loop().run_in_executor(cpu, find)
        else:
            around = asyncio.ensure_future(
                _neighbours(
                    pool,
                    bank_id,
                    ids,
                    neighbours,
                    neighbour_chunks,
                    conversation_gap,
                    conversation_scan,
                )
            )
    unknown = [i for i in ids if cache is None or i not in cache] if token_vectors else []
    early = (
        asyncio.ensure_future(_fetch(pool, _TOKEN_VECTORS, bank_id, unknown)) if unknown else None
    )
    try:
        rows = await rows_read
        found = await around if around is not None else None
        read = await early if early is not None else []
    except BaseException:
        for task in (rows_read, around, early):
            if task is not None:
                task.cancel()
        raise
    context: dict[str, list[str]] = {}
    blobs: dict[str, bytes] = {}
    if token_vectors:
        versions: dict[str, datetime] = {r["id"]: r["version"] for r in rows}
        if found is not None:
            context = found.neighbours
            for fact_id, version in found.versions.items():
                versions.setdefault(fact_id, version)
        blobs = await _token_vectors(pool, bank_id, versions, cache, counts, read)
    where = {fact_id: n for n, fact_id in enumerate(ids)}
    by_id = {
        r["id"]: CandidateRow(
            id=r["id"],
            fact_type=r["fact_type"],
            text=r["text"],
            context=r["context"],
            occurred_start=r["occurred_start"],
            occurred_end=r["occurred_end"],
            mentioned_at=r["mentioned_at"],
            document_id=r["document_id"],
            chunk_id=r["chunk_id"],
            metadata=dict(r["metadata"]),
            tags=list(r["tags"]),
            proof_count=int(r["proof_count"]),
            embedding=(
                held_vectors[where[r["id"]]]
                if held_vectors is not None
                else np.asarray(r["embedding"].to_numpy(), dtype=np.float32)
            ),
            token_vectors=blobs.get(r["id"]),
            entities=list(r["entities"]),
            entity_ids=tuple(r["entity_ids"]),
            context_vectors=tuple(blobs[n] for n in context.get(r["id"], []) if n in blobs),
            importance=float(r["importance"]),
            strength=float(r["strength"]),
            state=r["state"],
            valid_from=r["valid_from"],
            valid_to=r["valid_to"],
            superseded_by=r["superseded_by"],
            known_at=r["known_at"],
        )
        for r in rows
    }
    return [by_id[i] for i in ids if i in by_id]


async def _neighbours(
    pool: Pool,
    bank_id: str,
    ids: list[str],
    neighbours: int,
    chunks: int,
    gap: timedelta,
    scan: int,
) -> Around:
    rows = await _fetch(pool, NEIGHBOURS_SQL, bank_id, ids, neighbours, chunks, gap, scan)
    return around_of(rows)


async def _token_vectors(
    pool: Pool,
    bank_id: str,
    versions: dict[str, datetime],
    cache: TokenVectorCache | None,
    counts: BlobCounts,
    read: Sequence[asyncpg.Record] = (),
) -> dict[str, bytes]:
    """fact id -> stored token vectors of the facts in `versions`: those already `read`, then
    those the cache holds in that version, then the rest from the database. Facts stored
    without token vectors are absent."""
    found: dict[str, bytes] = {}
    for r in read:
        counts.read += 1
        if cache is not None:
            cache.put(r["id"], r["version"], r["token_vectors"])
        if versions.get(r["id"]) == r["version"]:
            found[r["id"]] = r["token_vectors"]
    missing: list[str] = []
    for fact_id, version in versions.items():
        if fact_id in found:
            continue
        blob = cache.get(fact_id, version) if cache is not None else None
        if blob is None:
            missing.append(fact_id)
        else:
            found[fact_id] = blob
            counts.cached += 1
    if missing:
        for r in await _fetch(pool, _TOKEN_VECTORS, bank_id, missing):
            counts.read += 1
            found[r["id"]] = r["token_vectors"]
            if cache is not None:
                cache.put(r["id"], r["version"], r["token_vectors"])
    return found


async def warm_token_cache(
    pool: Pool, cache: TokenVectorCache, bank_id: str, batch: int = WARM_BATCH
) -> int:
    """Fill the cache's free room with the bank's token vectors, so the recalls that follow
    read none (the server calls it once a bank's graph is held: a server that has answered
    for a while holds them anyway, this gets it there at once). Never evicts; stops when the
    cache is full. Blobs are keyed by version like any other, so a fact changed later is
    never served stale; if a blob is discarded (erasure, correction) while the warm runs, the
    warm drops every blob it added, since a row it read may be one discarded meanwhile.
    Returns how many blobs it added."""
    if not cache.enabled:
        return 0
    generation = cache.generation
    added: list[str] = []
    async with pool.acquire() as conn, conn.transaction(readonly=True):
        cursor = await conn.cursor(_WARM, bank_id)
        while rows := await cursor.fetch(batch):
            if cache.generation != generation:
                cache.drop(added)
                return 0
            for r in rows:
                if r["id"] in cache:
                    continue
                if not cache.offer(r["id"], r["version"], r["token_vectors"]):
                    return len(added)
                added.append(r["id"])
            await asyncio.sleep(0)  # let recalls run between batches
    return len(added)


async def fetch_evidence(conn: Connection, observation_ids: Sequence[str]) -> dict[str, list[str]]:
    """observation id -> ids of the facts supporting it, newest evidence first."""
    evidence: dict[str, list[str]] = {}
    for r in await conn.fetch(_EVIDENCE, list(observation_ids)):
        evidence.setdefault(r["observation_id"], []).append(r["fact_id"])
    return evidence


async def fetch_chunks(
    conn: Connection, bank_id: str, chunk_ids: Sequence[str]
) -> dict[str, tuple[str, int]]:
    """chunk id -> (text, index)."""
    rows = await conn.fetch(_CHUNKS, bank_id, list(chunk_ids))
    return {r["chunk_id"]: (r["content"], int(r["chunk_index"])) for r in rows}


async def source_facts(
    pool: Pool, request: RecallRequest, kept: list[RecalledMemory]
) -> tuple[dict[str, list[str]], list[CandidateRow], bool]:
    """The returned observations' supporting facts, filling source_facts_max_tokens in
    result order (an observation's newest evidence first)."""
    observations = [m.row.id for m in kept if m.row.fact_type == "observation"]
    if not observations:
        return {}, [], False
    async with pool.acquire() as conn:
        evidence = await fetch_evidence(conn, observations)
    wanted = list(dict.fromkeys(f for o in observations for f in evidence.get(o, [])))
    rows = await fetch_rows(pool, request.bank_id, wanted, token_vectors=False, entities=True)
    fitted, _ = fill_budget(
        rows, lambda r: estimate_tokens(r.text), request.source_facts_max_tokens
    )
    return evidence, fitted, len(fitted) < len(rows)
