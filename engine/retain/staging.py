"""Steps 2-3: extract facts from chunks and embed them, staged by deterministic fact id."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Executor
from dataclasses import asdict, replace
from datetime import datetime
from typing import Any

import numpy as np
from pgvector import Vector

from engine.db import Connection, Pool
from engine.embedding import Embedder
from engine.lifecycle.importance import local_importance
from engine.recall.vectors import encode_token_vectors
from engine.retain.gate import OrderedGate
from engine.retain.payloads import ChunkJob, ExtractionBatch, StagedFacts
from engine.types import ExtractedEntity, ExtractedFact, ItemContext

# Namespace for fact ids: uuid5(FACT_NAMESPACE, chunk identity + index) is the same on every
# retry, so re-running a step overwrites its staged rows instead of adding new ones.
FACT_NAMESPACE = uuid.UUID("6f1b8a52-7c1e-4d0a-9a57-3e2f0d1c9b44")

ChunkExtractor = Callable[[ChunkJob, ItemContext], Awaitable[list[ExtractedFact]]]


def fact_id(bank_id: str, chunk: ChunkJob, mode: str, index: int) -> str:
    key = f"{bank_id}\x1f{chunk.chunk_id}\x1f{chunk.content_hash}\x1f{mode}\x1f{index}"
    return str(uuid.uuid5(FACT_NAMESPACE, key))


def chunk_as_fact(chunk: ChunkJob) -> ExtractedFact:
    """The `none` provider: the chunk text is the fact."""
    return ExtractedFact(
        text=chunk.text,
        source_start=0,
        source_end=len(chunk.text),
        occurred_start=None,
        occurred_end=None,
    )


def with_hints(fact: ExtractedFact, hints: Sequence[str]) -> ExtractedFact:
    """Add the caller's entity hints that the fact mentions."""
    lowered = fact.text.casefold()
    names = {e.name.casefold() for e in fact.entities}
    extra = [
        ExtractedEntity(hint)
        for hint in hints
        if hint.strip() and hint.casefold() in lowered and hint.casefold() not in names
    ]
    return replace(fact, entities=[*fact.entities, *extra]) if extra else fact


def fact_to_json(fact: ExtractedFact) -> dict[str, Any]:
    data = asdict(fact)
    if data.get("importance") is None:  # the `none` provider, or a model that gave none
        data["importance"] = local_importance(fact.text, len(fact.entities))
    for key in ("occurred_start", "occurred_end"):
        value = data[key]
        data[key] = value.isoformat() if isinstance(value, datetime) else None
    return data


def fact_from_json(data: dict[str, Any]) -> ExtractedFact:
    values = dict(data)
    for key in ("occurred_start", "occurred_end"):
        if values.get(key):
            values[key] = datetime.fromisoformat(values[key])
    values["entities"] = [ExtractedEntity(**e) for e in values.get("entities", [])]
    return ExtractedFact(**values)


_STAGE = """
INSERT INTO staged_facts (fact_id, bank_id, operation_id, document_id, chunk_id, fact)
SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::jsonb[])
ON CONFLICT (fact_id) DO UPDATE
    SET fact = EXCLUDED.fact, operation_id = EXCLUDED.operation_id,
        embedding = NULL, token_vectors = NULL, entity_ids = NULL, links = NULL
"""


async def stage_extracted(
    conn: Connection, batch: ExtractionBatch, extract: ChunkExtractor
) -> StagedFacts:
    """Extract every chunk of the batch and stage the facts (all chunks concurrently)."""
    contexts = [
        ItemContext(
            mentioned_at=c.mentioned_at, context=c.context, speaker=c.speaker, metadata=c.metadata
        )
        for c in batch.chunks
    ]
    results = await asyncio.gather(
        *(extract(chunk, ctx) for chunk, ctx in zip(batch.chunks, contexts, strict=True))
    )
    ids: list[str] = []
    rows: list[tuple[str, str, str, str, str, dict[str, Any]]] = []
    bank_id = batch.chunks[0].bank_id if batch.chunks else ""
    for chunk, facts in zip(batch.chunks, results, strict=True):
        for index, fact in enumerate(facts):
            fid = fact_id(chunk.bank_id, chunk, batch.extraction_mode, index)
            payload = fact_to_json(with_hints(fact, chunk.entity_hints))
            payload["_chunk"] = {
                "mentioned_at": chunk.mentioned_at.isoformat() if chunk.mentioned_at else None,
                "context": chunk.context,
                "metadata": chunk.metadata,
                "tags": chunk.tags,
                "index": index,
            }
            ids.append(fid)
            rows.append(
                (fid, chunk.bank_id, batch.operation_id, chunk.document_id, chunk.chunk_id, payload)
            )
    if rows:
        columns = list(zip(*rows, strict=True))
        await conn.execute(_STAGE, *columns)
    return StagedFacts(bank_id, batch.operation_id, ids)


_TEXTS = """
SELECT fact_id::text, fact->>'text' AS text FROM staged_facts WHERE fact_id = ANY($1)
ORDER BY fact_id
"""
_SET_EMBEDDINGS = """
UPDATE staged_facts AS s SET embedding = v.embedding, token_vectors = v.token_vectors
FROM unnest($1::uuid[], $2::vector[], $3::bytea[]) AS v(fact_id, embedding, token_vectors)
WHERE s.fact_id = v.fact_id
"""


# Texts per model run. A call's texts are sorted by length first, so each run pads little; the
# runs of one call go through the gate (engine/retain/gate.py) in the call's priority.
MODEL_BATCH = 128


def model_batches(texts: Sequence[str], size: int = MODEL_BATCH) -> list[list[int]]:
    """Indexes of `texts` per model run, similar lengths together (ties by text, so the runs
    do not depend on the order the texts came in)."""
    order = sorted(range(len(texts)), key=lambda i: (len(texts[i]), texts[i]))
    return [order[start : start + size] for start in range(0, len(order), size)]


async def embed_staged(
    pool: Pool, embedder: Embedder, cpu: Executor, staged: StagedFacts, gate: OrderedGate
) -> int:
    """Embed staged facts, any number: one model run per MODEL_BATCH texts. No connection is
    held while the model runs: with many runs waiting their turn, held connections would
    starve every other step."""
    async with pool.acquire() as conn:
        rows = await conn.fetch(_TEXTS, staged.fact_ids)
    texts = [row["text"] for row in rows]
    loop = asyncio.get_running_loop()

    async def run(indexes: list[int]) -> None:
        batch = [texts[i] for i in indexes]
        # One model run gives the sentence vectors and the reranker's token vectors.
        async with gate.hold(staged.priority):
            vectors, tokens = await loop.run_in_executor(cpu, embedder.embed_with_tokens, batch)
        async with pool.acquire() as conn:
            await conn.execute(
                _SET_EMBEDDINGS,
                [rows[i]["fact_id"] for i in indexes],
                [Vector(np.asarray(v, dtype=np.float32)) for v in vectors],
                [encode_token_vectors(t) for t in tokens],
            )

    async with asyncio.TaskGroup() as group:
        for indexes in model_batches(texts):
            group.create_task(run(indexes))
    return len(rows)
