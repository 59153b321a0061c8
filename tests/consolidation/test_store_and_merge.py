"""Observation writes against the real database: the near-duplicate merge, and the index
state recall depends on (embedding, token vectors, BM25 terms and statistics, entities)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import httpx
from consolidation_support import NOW, facts_of, observe

from engine.consolidation.claims import parse_claim
from engine.consolidation.encode import text_encoder
from engine.consolidation.merge import Current, merge_near_duplicates
from engine.consolidation.observations import observation_detail, observation_history
from engine.consolidation.store import (
    retract_observation,
    rewrite_observation,
)
from engine.db import Pool
from engine.embedding import Embedder


async def observation_ids(pool: Pool, bank: str) -> set[str]:
    rows = await pool.fetch(
        "SELECT id::text FROM memory_units WHERE bank_id = $1 AND fact_type = 'observation'",
        bank,
    )
    return {r["id"] for r in rows}


async def test_a_near_duplicate_is_merged_into_the_older_observation(
    api: httpx.AsyncClient, pool: Pool, embedder: Embedder, cpu: ThreadPoolExecutor, bank_id: str
) -> None:
    texts = ["Dana struggles with async Python.", "Dana has trouble with async Python code."]
    first_fact, second_fact = await facts_of(api, bank_id, texts)
    first = await observe(pool, embedder, cpu, bank_id, first_fact, texts[0])
    second = await observe(pool, embedder, cpu, bank_id, second_fact, texts[1])
    async with pool.acquire() as conn, conn.transaction():
        survivor, absorbed = await merge_near_duplicates(conn, bank_id, second, NOW)
    assert (survivor, absorbed) == (first.id, [second.id])
    assert await observation_ids(pool, bank_id) == {first.id}
    async with pool.acquire() as conn:
        detail = await observation_detail(conn, bank_id, first.id, NOW)
        gone = await observation_history(conn, bank_id, second.id)
    assert detail.proof_count == 2
    assert {e.fact_id for e in detail.evidence if e.stance == "supports"} == {
        first_fact,
        second_fact,
    }
    [merged] = detail.history
    assert merged.change == "merged" and merged.related_id == second.id
    [into] = gone
    assert into.change == "merged_into" and into.related_id == first.id


async def test_contradicting_duplicates_keep_the_newer_belief(
    api: httpx.AsyncClient, pool: Pool, embedder: Embedder, cpu: ThreadPoolExecutor, bank_id: str
) -> None:
    texts = ["Eli is not comfortable with async Python.", "Eli is comfortable with async Python."]
    old_fact, new_fact = await facts_of(api, bank_id, texts)
    old = await observe(pool, embedder, cpu, bank_id, old_fact, texts[0])
    new = await observe(pool, embedder, cpu, bank_id, new_fact, texts[1])
    newer = Current(
        new.id, new.text, [], new.embedding, new.claim, datetime(2024, 7, 1, tzinfo=UTC), NOW
    )
    async with pool.acquire() as conn, conn.transaction():
        survivor, absorbed = await merge_near_duplicates(conn, bank_id, newer, NOW)
    assert (survivor, absorbed) == (new.id, [old.id])
    async with pool.acquire() as conn:
        detail = await observation_detail(conn, bank_id, new.id, NOW)
    assert {e.fact_id: e.stance for e in detail.evidence} == {
        new_fact: "supports",
        old_fact: "superseded",
    }
    assert detail.proof_count == 1


async def test_beliefs_about_different_people_or_things_stay_apart(
    api: httpx.AsyncClient, pool: Pool, embedder: Embedder, cpu: ThreadPoolExecutor, bank_id: str
) -> None:
    texts = ["Finn prefers tea.", "Gus prefers tea.", "Finn likes dogs.", "Finn likes cats."]
    ids = await facts_of(api, bank_id, texts)
    written = [
        await observe(pool, embedder, cpu, bank_id, fact, text)
        for fact, text in zip(ids, texts, strict=True)
    ]
    async with pool.acquire() as conn, conn.transaction():
        for current in written:
            assert await merge_near_duplicates(conn, bank_id, current, NOW) == (current.id, [])
    assert len(await observation_ids(pool, bank_id)) == 4


async def test_observations_stay_indexed_for_recall_through_every_write(
    api: httpx.AsyncClient, pool: Pool, embedder: Embedder, cpu: ThreadPoolExecutor, bank_id: str
) -> None:
    [fact] = await facts_of(api, bank_id, ["Hana: I prefer tea."])
    current = await observe(pool, embedder, cpu, bank_id, fact, "Hana prefers tea.")
    longer = "Hana prefers green tea from Kyoto in the morning, and no longer prefers coffee."
    encoded = (await text_encoder(embedder, cpu)([longer]))[0]
    async with pool.acquire() as conn, conn.transaction():
        await rewrite_observation(
            conn,
            bank_id,
            current.id,
            text=longer,
            encoded=encoded,
            claim=parse_claim(longer),
            reason="test",
            fact_ids=[fact],
        )
    row = await pool.fetchrow(
        "SELECT text, token_count, token_vectors IS NOT NULL AS has_tokens,"
        " (SELECT count(*) FROM memory_terms t WHERE t.unit_id = m.id) AS terms,"
        " (SELECT count(*) FROM unit_entities ue WHERE ue.unit_id = m.id) AS entities"
        " FROM memory_units m WHERE id = $1",
        current.id,
    )
    assert row is not None and row["text"] == longer
    assert row["has_tokens"] and row["token_count"] > 5 and row["terms"] > 5
    assert row["entities"] == 1  # Hana, from the supporting fact
    await assert_bm25_statistics_exact(pool, bank_id)
    async with pool.acquire() as conn, conn.transaction():
        await retract_observation(conn, bank_id, current.id, reason="test", fact_ids=[])
    await assert_bm25_statistics_exact(pool, bank_id)
    async with pool.acquire() as conn:
        changes = [h.change for h in await observation_history(conn, bank_id, current.id)]
    assert changes == ["retracted", "updated"]


async def assert_bm25_statistics_exact(pool: Pool, bank: str) -> None:
    """bank_stats and bank_term_stats equal what memory_units and memory_terms hold."""
    stats = await pool.fetchrow(
        "SELECT unit_count, total_terms FROM bank_stats WHERE bank_id = $1", bank
    )
    actual = await pool.fetchrow(
        "SELECT count(*) AS n, coalesce(sum(token_count), 0) AS t FROM memory_units"
        " WHERE bank_id = $1",
        bank,
    )
    assert stats is not None and actual is not None
    assert (stats["unit_count"], stats["total_terms"]) == (actual["n"], actual["t"])
    drift = await pool.fetchval(
        "SELECT count(*) FROM bank_term_stats s WHERE s.bank_id = $1 AND s.df <> (SELECT"
        " count(*) FROM memory_terms t WHERE t.bank_id = $1 AND t.term = s.term)",
        bank,
    )
    assert drift == 0
