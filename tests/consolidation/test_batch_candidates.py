"""A local batch reads its facts' candidates at once (prefetch.py) and applies what the batch
itself writes on top: it makes the same observations, with the same evidence, as reading them
one fact at a time, in fewer statements."""

from __future__ import annotations

from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import pytest
from asyncpg.connection import LoggedQuery
from consolidation_support import configure, retain

from engine.consolidation.candidates import pending_facts
from engine.consolidation.encode import text_encoder
from engine.consolidation.local import LocalConsolidator, Tally
from engine.consolidation.store import refresh_observation
from engine.db import Connection, Pool, create_pool
from engine.embedding import Embedder
from engine.lifecycle.access import reinforce

LINES = [
    ("Marco", "I play tennis every weekend."),
    ("Lena", "I am learning Spanish."),
    ("Marco", "I play tennis on Saturdays."),
    ("Sam", "I have two kids."),
    ("Lena", "I am studying Spanish in the evenings."),
    ("Marco", "I live in Berlin."),
    ("Sam", "I have three kids."),
    ("Lena", "I prefer tea in the morning."),
    ("Marco", "I play tennis every Saturday morning."),
    ("Marco", "I live in Berlin with my wife."),
    ("Lena", "I am learning Spanish every evening."),
    ("Sam", "I have three kids now."),
    ("Lena", "I prefer coffee in the morning."),
    ("Marco", "I moved to Paris."),
    ("Marco", "I live in Paris now."),
    ("Lena", "I prefer coffee in the morning now."),
    ("Sam", "I have three kids and a dog."),
    ("Marco", "I play tennis every weekend with Lena."),
]
_OBSERVATIONS = """
SELECT m.text, m.proof_count, o.version, o.claim,
       array(SELECT e.fact_id::text || ':' || e.stance FROM observation_evidence e
             WHERE e.observation_id = m.id ORDER BY 1) AS evidence
FROM memory_units m JOIN observations o ON o.observation_id = m.id
WHERE m.bank_id = $1
ORDER BY m.text
"""
# What a consolidation made: its tally, the observations, its statements, the facts marked,
# and its statements that measure against one fact's vector (`_one_fact`).
Consolidated = tuple[Tally, list[tuple[Any, ...]], int, int, int]


def _one_fact(query: str) -> bool:
    """A statement that measures against one fact's vector ($3): a candidate read by the
    per-fact query (candidates.py, peers.py) or a new observation's near-duplicate search;
    the batch's reads (prefetch.py) measure against every fact's at once."""
    return "(m.embedding <=> $3)" in query


_MARKED = """
SELECT count(*) FROM memory_units m
WHERE m.bank_id = $1 AND m.fact_type <> 'observation'
  AND NOT EXISTS (SELECT 1 FROM consolidation_backlog b WHERE b.fact_id = m.id)
"""


async def _consolidate(
    conn: Connection, bank_id: str, encoder: Any, *, prefetch: bool
) -> Consolidated:
    """The whole backlog in batches of 7, rolled back: what it made, and its statements (the
    later batches meet observations the earlier ones made)."""
    statements: list[str] = []

    def log(query: LoggedQuery) -> None:
        statements.append(query.query)

    transaction = conn.transaction()
    await transaction.start()
    try:
        tally = Tally()
        conn.add_query_logger(log)
        while facts := await pending_facts(conn, bank_id, 7, lock=True):
            as_of = max(f.event_at for f in facts)
            consolidator = LocalConsolidator(
                conn, bank_id, encoder, as_of, tally, prefetch=prefetch
            )
            await consolidator.consolidate(facts)
        conn.remove_query_logger(log)
        made = [tuple(r) for r in await conn.fetch(_OBSERVATIONS, bank_id)]
        marked = int(await conn.fetchval(_MARKED, bank_id))
    finally:
        await transaction.rollback()
    return tally, made, len(statements), marked, sum(map(_one_fact, statements))


async def _both_ways(
    api: httpx.AsyncClient,
    pool: Pool,
    bank_id: str,
    embedder: Embedder,
    cpu: ThreadPoolExecutor,
    lines: list[tuple[str, str]],
) -> tuple[list[str], Consolidated, Consolidated]:
    """`lines` retained one a day, then the backlog consolidated one fact at a time and read
    at once (each rolled back): the retained ids and both outcomes."""
    await configure(api, bank_id, enable_observations=False)
    start = datetime(2024, 3, 1, 10, tzinfo=UTC)
    items = [
        {"content": f"{who}: {line}", "timestamp": start.replace(day=1 + n).isoformat()}
        for n, (who, line) in enumerate(lines)
    ]
    ids = await retain(api, bank_id, items)
    encoder = text_encoder(embedder, cpu)
    async with pool.acquire() as conn:
        one_by_one = await _consolidate(conn, bank_id, encoder, prefetch=False)
        at_once = await _consolidate(conn, bank_id, encoder, prefetch=True)
    return ids, one_by_one, at_once


async def test_a_batch_read_at_once_makes_what_one_fact_at_a_time_makes(
    api: httpx.AsyncClient, pool: Pool, bank_id: str, embedder: Embedder, cpu: ThreadPoolExecutor
) -> None:
    ids, one_by_one, at_once = await _both_ways(api, pool, bank_id, embedder, cpu, LINES)
    assert len(ids) >= len(LINES)
    tally, made, statements, marked, _ = one_by_one
    # The batch meets what it wrote itself: observations made, grown and revised in it.
    assert tally.created >= 2 and tally.reinforced + tally.updated >= 2, tally
    assert marked == len(ids)
    assert at_once[0] == tally
    assert at_once[1] == made
    assert at_once[3] == marked
    assert at_once[2] < statements


# An older fact no observation uses (the first batch), then two new ones like it (the second):
# the first of them takes it as a peer, and the observation they make states the shorter
# "every Saturday", which "every morning" is too unlike to support (0.87 < JOIN_SIMILARITY),
# though it is like the older fact (0.93). Its peers, read as its batch started, still list
# that fact; evidence now, it must be no peer any more.
_USED_PEER = [
    ("Marco", "I play tennis every Saturday morning."),
    ("Lena", "I am learning Spanish."),
    ("Sam", "I have two kids."),
    ("Priya", "I work as a nurse."),
    ("Ivo", "I collect vintage postcards."),
    ("Dana", "I adopted a kitten."),
    ("Zelda", "I grow tomatoes on my balcony."),
    ("Marco", "I play tennis every Saturday."),
    ("Marco", "I play tennis every morning."),
]


async def test_a_peer_that_became_evidence_in_the_batch_is_no_peer_for_the_facts_after_it(
    api: httpx.AsyncClient, pool: Pool, bank_id: str, embedder: Embedder, cpu: ThreadPoolExecutor
) -> None:
    ids, one_by_one, at_once = await _both_ways(api, pool, bank_id, embedder, cpu, _USED_PEER)
    assert len(ids) == len(_USED_PEER)
    tally, made, *_ = one_by_one
    tennis = [m for m in made if "tennis" in m[0]]
    assert len(tennis) == 1, made  # "every morning" is in none: its only peer was used
    assert tennis[0][0] == "Marco plays tennis every Saturday." and tennis[0][1] == 2, tennis
    assert at_once[0] == tally
    assert at_once[1] == made


async def _committed(
    database_url: str, bank_id: str, encoder: Any, connections: int
) -> tuple[list[tuple[Any, ...]], Counter[int], int]:
    """The backlog consolidated in batches of 7, each committed (as the activity commits
    them), on a pool of `connections` that the batches may read on beside their own: the
    observations made, how many batch reads each of the pool's connections ran, and how many
    statements measured against one fact's vector (`_one_fact`)."""
    reads: Counter[int] = Counter()
    one_fact = 0

    async def count_reads(conn: asyncpg.Connection) -> None:
        def log(query: LoggedQuery) -> None:
            nonlocal one_fact
            # every batch read (prefetch.py) lists the batch's facts with their claims
            if "AS b(id, subject, aspect)" in query.query:
                reads[id(conn)] += 1
            one_fact += _one_fact(query.query)

        conn.add_query_logger(log)

    two = await create_pool(database_url, max_size=connections, on_connect=count_reads)
    try:
        async with two.acquire() as conn:
            for _ in range(len(LINES)):  # bounded: a batch takes at least one fact
                async with conn.transaction():
                    facts = await pending_facts(conn, bank_id, 7, lock=True)
                    if not facts:
                        break
                    as_of = max(f.event_at for f in facts)
                    await LocalConsolidator(conn, bank_id, encoder, as_of, side=two).consolidate(
                        facts
                    )
            made = [tuple(r) for r in await conn.fetch(_OBSERVATIONS, bank_id)]
    finally:
        await two.close()
    return made, reads, one_fact


@pytest.mark.parametrize("connections", [2, 1], ids=["one-to-spare", "none-to-spare"])
async def test_a_batch_that_shares_its_reads_with_a_spare_connection_makes_the_same_observations(
    api: httpx.AsyncClient,
    pool: Pool,
    database_url: str,
    bank_id: str,
    embedder: Embedder,
    cpu: ThreadPoolExecutor,
    connections: int,
) -> None:
    _, _, at_once = await _both_ways(api, pool, bank_id, embedder, cpu, LINES)
    encoder = text_encoder(embedder, cpu)
    made, reads, one_fact = await _committed(database_url, bank_id, encoder, connections)
    # later batches meet what the earlier ones committed, on either connection
    assert made == at_once[1]
    # every connection the pool had read candidates (with none to spare, the batch's own)
    assert len(reads) == connections and sum(reads.values()) >= 3, reads
    assert one_fact == at_once[4]  # and what was read was used: no fact read again


_FRESHNESS = """
SELECT o.observation_id::text, o.first_evidence_at, o.last_evidence_at, o.trend
FROM observations o WHERE o.bank_id = $1 ORDER BY 1
"""


async def test_a_batchs_trends_written_at_its_end_are_what_each_change_wrote(
    api: httpx.AsyncClient, pool: Pool, bank_id: str, embedder: Embedder, cpu: ThreadPoolExecutor
) -> None:
    await configure(api, bank_id, enable_observations=False)
    start = datetime(2024, 3, 1, 10, tzinfo=UTC)
    items = [
        {"content": f"{who}: {line}", "timestamp": (start + timedelta(days=3 * n)).isoformat()}
        for n, (who, line) in enumerate(LINES)
    ]
    await retain(api, bank_id, items)
    encoder = text_encoder(embedder, cpu)
    async with pool.acquire() as conn, conn.transaction():
        facts = await pending_facts(conn, bank_id, len(LINES) * 2, lock=True)
        as_of = max(f.event_at for f in facts)
        tally = await LocalConsolidator(conn, bank_id, encoder, as_of).consolidate(facts)
        assert tally.created >= 2 and tally.reinforced >= 1, tally
        batched = [tuple(r) for r in await conn.fetch(_FRESHNESS, bank_id)]
        # each observation refreshed again on its own, its trend written at once
        for observation_id, *_ in batched:
            await refresh_observation(conn, bank_id, observation_id, as_of)
        assert [tuple(r) for r in await conn.fetch(_FRESHNESS, bank_id)] == batched
        assert all(first is not None and last is not None for _, first, last, _ in batched)
        assert {trend for *_, trend in batched} - {"new"}, batched


async def test_refreshing_an_observation_folds_in_its_pending_accesses_first(
    api: httpx.AsyncClient, pool: Pool, bank_id: str, embedder: Embedder, cpu: ThreadPoolExecutor
) -> None:
    await configure(api, bank_id, enable_observations=False)
    start = datetime(2024, 3, 1, 10, tzinfo=UTC)
    items = [
        {"content": f"{who}: {line}", "timestamp": (start + timedelta(days=n)).isoformat()}
        for n, (who, line) in enumerate(LINES)
    ]
    await retain(api, bank_id, items)
    encoder = text_encoder(embedder, cpu)
    async with pool.acquire() as conn, conn.transaction():
        facts = await pending_facts(conn, bank_id, len(LINES) * 2, lock=True)
        as_of = max(f.event_at for f in facts)
        await LocalConsolidator(conn, bank_id, encoder, as_of).consolidate(facts)
        row = await conn.fetchrow(
            "SELECT id::text AS id, strength, access_count FROM memory_units"
            " WHERE bank_id = $1 AND fact_type = 'observation' ORDER BY importance LIMIT 1",
            bank_id,
        )
        assert row is not None
        # recall returned the observation three times since the lifecycle last ran
        seen = datetime(2024, 6, 1, tzinfo=UTC)
        assert await reinforce(conn, bank_id, {row["id"]: 3}, seen, 0.2) == 1
        await refresh_observation(conn, bank_id, row["id"], as_of)
        after = await conn.fetchrow(
            "SELECT strength, access_count, last_accessed_at, importance FROM memory_units"
            " WHERE id = $1",
            row["id"],
        )
        assert after is not None
        pending = await conn.fetchval(
            "SELECT count(*) FROM fact_access WHERE bank_id = $1", bank_id
        )
    assert pending == 0
    assert after["access_count"] == row["access_count"] + 3
    assert after["last_accessed_at"] == seen
    reinforced = 1 - (1 - row["strength"]) * 0.8**3
    assert after["strength"] == pytest.approx(max(reinforced, after["importance"]))


async def test_a_read_that_fails_on_the_spare_connection_fails_the_batch_with_its_own_error(
    api: httpx.AsyncClient,
    pool: Pool,
    database_url: str,
    bank_id: str,
    embedder: Embedder,
    cpu: ThreadPoolExecutor,
) -> None:
    await configure(api, bank_id, enable_observations=False)
    await retain(api, bank_id, [{"content": f"{who}: {line}"} for who, line in LINES[:6]])

    async def astray(conn: asyncpg.Connection) -> None:
        await conn.execute("SET search_path TO nowhere")  # every table unknown there

    side = await create_pool(database_url, max_size=1, on_connect=astray)
    try:
        async with pool.acquire() as conn:
            transaction = conn.transaction()
            await transaction.start()
            try:
                facts = await pending_facts(conn, bank_id, 7, lock=True)
                as_of = max(f.event_at for f in facts)
                consolidator = LocalConsolidator(
                    conn, bank_id, text_encoder(embedder, cpu), as_of, side=side
                )
                # the error itself, not a group of them: the worker maps errors by their type
                with pytest.raises(asyncpg.UndefinedTableError):
                    await consolidator.consolidate(facts)
            finally:
                await transaction.rollback()
    finally:
        await side.close()
