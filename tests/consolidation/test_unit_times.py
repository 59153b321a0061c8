"""The units' times indexed in a table of their own (migration 0044): unit_times holds what
memory_units holds whichever path writes a unit, and with no time indexed on memory_units an
observation's new evidence rewrites its row in place (a HOT update: no index entry, no HNSW
insertion)."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import asyncpg
import httpx
from consolidation_support import (
    BASE,
    NOW,
    configure,
    facts_of,
    observations,
    observe,
    retain,
    wait_consolidated,
)
from support.old_schema import migrate_before

from engine.consolidation.store import Evidence, reinforce_observation
from engine.db import Pool, migrate
from engine.embedding import Embedder
from engram.postgres import EmbeddedPostgres

_APART = """
SELECT coalesce(m.id, t.unit_id)::text AS id FROM
    (SELECT * FROM memory_units WHERE bank_id = $1) m
    FULL JOIN (SELECT * FROM unit_times WHERE bank_id = $1) t ON t.unit_id = m.id
WHERE (m.id, m.bank_id, m.fact_type, m.occurred_start, m.occurred_end, m.mentioned_at)
      IS DISTINCT FROM (t.unit_id, t.bank_id, t.fact_type, t.occurred_start, t.occurred_end,
                        t.mentioned_at)
"""
# Columns of memory_units that any index reads (keys, expressions, predicates): an update
# that changes one of them can never be HOT.
_INDEXED_COLUMNS = """
SELECT DISTINCT a.attname FROM pg_index i
JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum > 0
WHERE i.indrelid = 'memory_units'::regclass
  AND (a.attnum = ANY(i.indkey)
       OR pg_get_expr(i.indexprs, i.indrelid) ~ ('\\m' || a.attname || '\\M')
       OR pg_get_expr(i.indpred, i.indrelid) ~ ('\\m' || a.attname || '\\M'))
"""
_UPDATES = """
SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_xact_user_tables WHERE relname = 'memory_units'
"""
_OLD_UNIT = """
INSERT INTO memory_units (id, bank_id, fact_type, text, embedding, occurred_start, occurred_end,
                          mentioned_at)
VALUES ($1, $2, $3, $4, array_fill(0.1::real, ARRAY[$5::int])::halfvec, $6, $7, $8)
"""


def _at(day: int) -> datetime:
    return datetime(2024, 3, day, 10, tzinfo=UTC)


async def _apart(pool: Pool, bank: str) -> list[str]:
    return [r["id"] for r in await pool.fetch(_APART, bank)]


async def test_an_upgraded_database_keeps_its_units_times_beside_them(
    postgres: EmbeddedPostgres, embedder: Embedder
) -> None:
    dsn = postgres.create_database(f"t_times_{uuid.uuid4().hex[:10]}")
    await migrate_before(dsn, embedder.dimension, 44)
    bank = "before-0044"
    fact, observation, undated = (str(uuid.uuid4()) for _ in range(3))
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("INSERT INTO banks (bank_id, name) VALUES ($1, $1)", bank)
        for unit_id, kind, times in (
            (fact, "world", (_at(2), _at(4), _at(5))),
            (observation, "observation", (_at(1), _at(9), _at(9))),
            (undated, "experience", (None, None, _at(7))),
        ):
            await conn.execute(
                _OLD_UNIT, unit_id, bank, kind, f"unit {unit_id}", embedder.dimension, *times
            )
        assert {"occurred_start", "mentioned_at"} <= {
            r["attname"] for r in await conn.fetch(_INDEXED_COLUMNS)
        }

        applied = await migrate(dsn, embedder.dimension, embedder.space)

        assert applied[0] == "0044_unit_times.sql"
        rows = await conn.fetch(
            "SELECT unit_id::text, fact_type, occurred_start, occurred_end, mentioned_at"
            " FROM unit_times WHERE bank_id = $1 ORDER BY mentioned_at",
            bank,
        )
        assert [tuple(r) for r in rows] == [
            (fact, "world", _at(2), _at(4), _at(5)),
            (undated, "experience", None, None, _at(7)),
            (observation, "observation", _at(1), _at(9), _at(9)),
        ]
        indexed = {r["attname"] for r in await conn.fetch(_INDEXED_COLUMNS)}
        assert not indexed & {"occurred_start", "occurred_end", "mentioned_at"}, indexed
    finally:
        await conn.close()


async def test_every_path_that_writes_a_unit_keeps_its_times_beside_it(
    api: httpx.AsyncClient, pool: Pool, bank_id: str
) -> None:
    # retain, and consolidation's observation reinforced week after week
    texts = [
        "I play tennis every weekend.",
        "I play tennis on weekends.",
        "I play tennis at the weekend.",
    ]
    for week, text in enumerate(texts):
        item = {
            "content": f"Marco: {text}",
            "timestamp": f"2024-03-{10 + 7 * week:02d}T10:00:00Z",
            "document_id": f"tennis-{week}",
        }
        await retain(api, bank_id, [item])
        await wait_consolidated(api, bank_id)
    [observation] = await observations(api, bank_id)
    assert observation["proof_count"] == 3
    units = await pool.fetchval("SELECT count(*) FROM unit_times WHERE bank_id = $1", bank_id)
    assert units == 4
    assert await _apart(pool, bank_id) == []

    # a correction of a fact's dates and type
    listed = await api.get(f"{BASE}/{bank_id}/memories/list", params={"document_id": "tennis-1"})
    [fact] = listed.json()["items"]
    corrected = await api.patch(
        f"{BASE}/{bank_id}/memories/{fact['id']}",
        json={"occurred_start": "2024-03-01T00:00:00Z", "fact_type": "experience"},
    )
    assert corrected.status_code == 200, corrected.text
    assert await _apart(pool, bank_id) == []
    kind = await pool.fetchval("SELECT fact_type FROM unit_times WHERE unit_id = $1", fact["id"])
    assert kind == "experience"

    # a document replaced and one deleted
    await configure(api, bank_id, enable_observations=False)
    await retain(
        api,
        bank_id,
        [
            {
                "content": "Marco: I gave up tennis for squash.",
                "timestamp": "2024-05-01T10:00:00Z",
                "document_id": "tennis-0",
            }
        ],
    )
    deleted = await api.delete(f"{BASE}/{bank_id}/documents/tennis-2")
    assert deleted.status_code == 200, deleted.text
    assert await _apart(pool, bank_id) == []
    remaining = await pool.fetchval("SELECT count(*) FROM unit_times WHERE bank_id = $1", bank_id)
    assert remaining == await pool.fetchval(
        "SELECT count(*) FROM memory_units WHERE bank_id = $1", bank_id
    )


async def test_an_observations_new_evidence_rewrites_its_row_in_place(
    api: httpx.AsyncClient, pool: Pool, embedder: Embedder, cpu: ThreadPoolExecutor, bank_id: str
) -> None:
    texts = ["Noor bakes bread on Sundays.", "Noor baked sourdough bread this Sunday."]
    first, second = await facts_of(api, bank_id, texts)
    current = await observe(pool, embedder, cpu, bank_id, first, texts[0])
    before = await pool.fetchval("SELECT mentioned_at FROM memory_units WHERE id = $1", current.id)

    async with pool.acquire() as conn, conn.transaction():
        await reinforce_observation(conn, bank_id, current.id, [Evidence(second, texts[1])], NOW)
        counted = await conn.fetchrow(_UPDATES)

    assert counted is not None
    updates, hot = counted["n_tup_upd"], counted["n_tup_hot_upd"]
    assert updates >= 1 and hot == updates
    after = await pool.fetchval(
        "SELECT mentioned_at FROM unit_times WHERE unit_id = $1", current.id
    )
    assert after > before
    assert await _apart(pool, bank_id) == []
