"""The batched link step plans the same links as the per-fact algorithm it replaced.

The oracle below is that algorithm (a query per fact and type, Python loops over every
in-flight peer), kept here only to compare against. The corpus runs through the real retain
steps: one document stored, two in flight, so every link type and every target kind (stored,
same batch, another document in flight) occurs. Times and texts are distinct, so neither
algorithm has ties to break.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from pgvector import Vector

from engine.db import Connection, Pool
from engine.embedding import Embedder
from engine.retain.gate import OrderedGate
from engine.retain.links import (
    _FORCE_HNSW,
    _IN_FLIGHT,
    _SEMANTIC,
    _STAGED,
    ENTITY_K,
    HNSW_ABOVE,
    IN_FLIGHT_LIMIT,
    SEMANTIC_K,
    SEMANTIC_MIN,
    TEMPORAL_K,
    TEMPORAL_WINDOW,
    Link,
    _entity_neighbours,
    _keep_best,
    entity_weight,
    link_staged,
    temporal_weight,
)
from engine.retain.payloads import (
    ChunkJob,
    DocumentPlan,
    ExtractionBatch,
    LinkOptions,
    RetainItem,
    UpsertDocument,
)
from engine.retain.resolve import resolve_staged_entities
from engine.retain.staging import embed_staged, stage_extracted
from engine.retain.upsert import upsert_document
from engine.store.banks import ensure_bank
from engine.types import ExtractedEntity, ExtractedFact, ItemContext

START = datetime(2024, 3, 1, 9, tzinfo=UTC)
PEOPLE = ("Caroline", "Melanie", "Jon", "Gina")
ACTIVITIES = (
    "went to a support group meeting",
    "attended a support group in the evening",
    "painted a sunrise over the lake",
    "painted a landscape with watercolours",
    "ran a charity race in the park",
    "signed up for a pottery class",
    "adopted a rescue dog from the shelter",
)


def document_facts(doc: int) -> list[list[ExtractedFact]]:
    """Two chunks of four facts; the second fact of each chunk is caused by the first."""
    chunks: list[list[ExtractedFact]] = []
    for c in range(2):
        facts = []
        for f in range(4):
            n = doc * 8 + c * 4 + f
            person = PEOPLE[n % len(PEOPLE)]
            facts.append(
                ExtractedFact(
                    text=f"{person} {ACTIVITIES[n % len(ACTIVITIES)]} (note {n}).",
                    occurred_start=START + timedelta(days=doc * 3, hours=n * 7, minutes=n),
                    entities=[ExtractedEntity(person, "person")]
                    + ([ExtractedEntity("Oslo", "place")] if n % 3 == 0 else []),
                    causes=[0] if f == 1 else [],
                )
            )
        chunks.append(facts)
    return chunks


def chunk_jobs(bank: str, doc: int) -> list[ChunkJob]:
    return [
        ChunkJob(
            bank,
            f"doc-{doc}",
            f"doc-{doc}-chunk-{c}",
            f"chunk {c} of document {doc}",
            START + timedelta(days=doc * 3),
            content_hash=f"h{doc}{c}",
        )
        for c in range(2)
    ]


async def stage_document(
    pool: Pool, embedder: Embedder, cpu: ThreadPoolExecutor, bank: str, doc: int
) -> list[str]:
    """Extract (scripted), embed and resolve one document; returns its fact ids."""
    facts = {
        job.chunk_id: chunk
        for job, chunk in zip(chunk_jobs(bank, doc), document_facts(doc), strict=True)
    }

    async def extract(chunk: ChunkJob, item: ItemContext) -> list[ExtractedFact]:
        return facts[chunk.chunk_id]

    async with pool.acquire() as conn:
        await ensure_bank(conn, bank)
        staged = await stage_extracted(
            conn, ExtractionBatch("op", "local", chunk_jobs(bank, doc)), extract
        )
    await embed_staged(pool, embedder, cpu, staged, OrderedGate(2))
    async with pool.acquire() as conn, conn.transaction():
        await resolve_staged_entities(conn, staged)
    return staged.fact_ids


async def store_document(pool: Pool, cpu: ThreadPoolExecutor, bank: str, doc: int) -> None:
    jobs = chunk_jobs(bank, doc)
    async with pool.acquire() as conn:
        ids = [r["fact_id"] for r in await conn.fetch(_FACT_IDS, bank, f"doc-{doc}")]
    await link_staged(pool, cpu, LinkOptions(bank, "op", ids))
    plan = DocumentPlan(f"doc-{doc}", jobs, [], [])
    item = RetainItem("text", START)
    async with pool.acquire() as conn:
        await upsert_document(conn, UpsertDocument(bank, "op", plan, [item]))


_FACT_IDS = "SELECT fact_id::text FROM staged_facts WHERE bank_id = $1 AND document_id = $2"


# --- the per-fact algorithm the batched step replaced --------------------------------------

_OLD_SEMANTIC = """
SELECT id::text, 1 - (embedding <=> $2) AS similarity FROM memory_units
WHERE bank_id = $1 AND fact_type <> 'observation' ORDER BY embedding <=> $2 LIMIT $3
"""
_OLD_TEMPORAL = """
SELECT id::text, coalesce(occurred_start, mentioned_at) AS at FROM memory_units
WHERE bank_id = $1 AND fact_type <> 'observation'
  AND coalesce(occurred_start, mentioned_at) BETWEEN $2 AND $3
ORDER BY abs(extract(epoch FROM coalesce(occurred_start, mentioned_at) - $4)) LIMIT $5
"""


async def oracle(conn: Connection, bank: str, fact_ids: list[str]) -> dict[str, list[Link]]:
    rows = [r for r in await conn.fetch(_STAGED, fact_ids) if r["embedding"] is not None]
    peers = rows + list(await conn.fetch(_IN_FLIGHT, bank, fact_ids, IN_FLIGHT_LIMIT))
    # float16 halfvec values (migration 0026), multiplied in float32 as the link step does.
    matrix = np.vstack([p["embedding"].to_numpy() for p in peers]).astype(np.float32)
    neighbours = await _entity_neighbours(conn, rows)
    planned: dict[str, list[Link]] = {}
    for row in rows:
        me = row["fact_id"]
        vector = row["embedding"]
        semantic = [
            Link(r["id"], "semantic", float(r["similarity"]))
            for r in await conn.fetch(_OLD_SEMANTIC, bank, vector, SEMANTIC_K)
        ]
        similarities = matrix @ vector.to_numpy().astype(np.float32)
        for index in np.argsort(-similarities)[: SEMANTIC_K + 1]:
            semantic.append(Link(peers[index]["fact_id"], "semantic", float(similarities[index])))
        semantic = [x for x in semantic if x.weight >= SEMANTIC_MIN and x.to_unit != me]
        semantic.sort(key=lambda x: -x.weight)
        links = semantic[:SEMANTIC_K]
        at = row["at"]
        stored = await conn.fetch(
            _OLD_TEMPORAL, bank, at - TEMPORAL_WINDOW, at + TEMPORAL_WINDOW, at, TEMPORAL_K
        )
        temporal = [Link(r["id"], "temporal", temporal_weight(at, r["at"])) for r in stored]
        temporal += [
            Link(p["fact_id"], "temporal", temporal_weight(at, p["at"]))
            for p in peers
            if abs(p["at"] - at) <= TEMPORAL_WINDOW and p["fact_id"] != me
        ]
        temporal.sort(key=lambda x: -x.weight)
        links += temporal[:TEMPORAL_K]
        for eid in row["entity_ids"]:
            count, units = neighbours.get(eid, (0, []))
            others = [p["fact_id"] for p in peers if p["fact_id"] != me and eid in p["entity_ids"]]
            weight = entity_weight(count + len(others) + 1)
            links += [Link(u, "entity", weight) for u in units[:ENTITY_K]]
            links += [Link(o, "entity", weight) for o in others[:ENTITY_K]]
        causes = set(row["causes"])
        links += [
            Link(p["fact_id"], "causal", 1.0)
            for p in peers
            if p["chunk_id"] == row["chunk_id"] and p["idx"] in causes and p["fact_id"] != me
        ]
        planned[me] = _keep_best([x for x in links if x.to_unit != me])
    return planned


def as_set(links: list[dict[str, Any]] | list[Link]) -> set[tuple[str, str, float]]:
    return {
        (x.to_unit, x.link_type, round(x.weight, 4))
        if isinstance(x, Link)
        else (x["to"], x["type"], round(float(x["weight"]), 4))
        for x in links
    }


async def test_batched_links_equal_the_per_fact_links(
    pool: Pool, embedder: Embedder, cpu: ThreadPoolExecutor, bank_id: str
) -> None:
    await stage_document(pool, embedder, cpu, bank_id, 0)
    await store_document(pool, cpu, bank_id, 0)
    batch = await stage_document(pool, embedder, cpu, bank_id, 1)
    await stage_document(pool, embedder, cpu, bank_id, 2)  # another document in flight
    async with pool.acquire() as conn:
        expected = await oracle(conn, bank_id, batch)
    await link_staged(pool, cpu, LinkOptions(bank_id, "op", batch))
    async with pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT fact_id::text, links FROM staged_facts WHERE fact_id = ANY($1)", batch
        )
        stored_ids = {
            str(r["id"])
            for r in await conn.fetch("SELECT id FROM memory_units WHERE bank_id = $1", bank_id)
        }
    actual = {r["fact_id"]: r["links"] for r in rows}
    assert set(actual) == set(batch) == set(expected)
    for fid in batch:
        assert as_set(actual[fid]) == as_set(expected[fid]), fid
    every = [x for links in expected.values() for x in links]
    assert {x.link_type for x in every} == {"semantic", "temporal", "entity", "causal"}
    targets = {x.to_unit for x in every}
    assert targets & stored_ids  # links to stored facts
    assert targets & set(batch)  # to the batch itself
    assert targets - stored_ids - set(batch)  # to the other document in flight


async def test_links_wait_for_targets_still_in_flight(
    pool: Pool, embedder: Embedder, cpu: ThreadPoolExecutor, bank_id: str
) -> None:
    """A link to a fact of a document still in flight is stored once that fact is."""
    await stage_document(pool, embedder, cpu, bank_id, 0)
    await stage_document(pool, embedder, cpu, bank_id, 1)
    await store_document(pool, cpu, bank_id, 0)
    async with pool.acquire() as conn:
        pending = await conn.fetchval(
            "SELECT count(*) FROM pending_links WHERE bank_id = $1", bank_id
        )
    assert pending > 0
    await store_document(pool, cpu, bank_id, 1)
    async with pool.acquire() as conn:
        left = await conn.fetchval("SELECT count(*) FROM pending_links WHERE bank_id = $1", bank_id)
        across = await conn.fetchval(
            "SELECT count(*) FROM memory_links l JOIN memory_units a ON a.id = l.from_unit"
            " JOIN memory_units b ON b.id = l.to_unit"
            " WHERE l.bank_id = $1 AND a.document_id = 'doc-0' AND b.document_id = 'doc-1'",
            bank_id,
        )
    assert left == 0
    assert across > 0


async def test_a_large_bank_is_searched_through_the_hnsw_index_even_on_stale_statistics(
    pool: Pool, bank_id: str
) -> None:
    """Statistics taken while the bank was empty make the planner scan every fact of the
    bank per linked fact; past HNSW_ABOVE facts the link step must walk the index instead."""
    rng = np.random.default_rng(7)
    vectors = [Vector(v / np.linalg.norm(v)) for v in rng.normal(size=(HNSW_ABOVE + 200, 384))]
    async with pool.acquire() as conn:
        await ensure_bank(conn, bank_id)
        await conn.execute("ANALYZE memory_units")  # the bank has no facts yet
        await conn.execute(
            "INSERT INTO memory_units (id, bank_id, fact_type, text, embedding) "
            "SELECT gen_random_uuid(), $1, 'world', 'fact ' || n, v "
            "FROM unnest($2::vector[]) WITH ORDINALITY AS u(v, n)",
            bank_id,
            vectors,
        )
        query = ["q1", "q2"], vectors[:2]
        async with conn.transaction():
            await conn.execute(_FORCE_HNSW, bank_id, HNSW_ABOVE)
            plan = "\n".join(
                r[0] for r in await conn.fetch(f"EXPLAIN {_SEMANTIC}", bank_id, *query, SEMANTIC_K)
            )
            found = await conn.fetch(_SEMANTIC, bank_id, *query, SEMANTIC_K)
    assert "memory_units_embedding" in plan
    assert "Sort" not in plan
    nearest: dict[str, list[float]] = {r["fact_id"]: [] for r in found}
    for r in found:
        nearest[r["fact_id"]].append(float(r["similarity"]))
    # Each query vector is a stored fact: it finds itself first, then SEMANTIC_K - 1 more.
    assert sorted(nearest) == ["q1", "q2"]
    for similarities in nearest.values():
        assert len(similarities) == SEMANTIC_K
        assert max(similarities) == pytest.approx(1.0, abs=1e-5)
