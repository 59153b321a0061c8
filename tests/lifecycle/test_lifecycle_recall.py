"""Recall under the lifecycle: importance stored, archived and superseded facts left out by
default and brought back on request (superseded ranked below, with validity), `as_of`, and
reinforcement of returned facts flushed off the request path."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from starlette.applications import Starlette

from engine.db import Pool
from engine.lifecycle.access import reinforce
from engine.lifecycle.access_state import access_states, fold_range
from engine.lifecycle.maintenance import run_batch
from engine.lifecycle.policy import LifecyclePolicy
from engine.lifecycle.supersession import Supersession, supersede

BASE = "/v1/default/banks"


async def retain(api: httpx.AsyncClient, bank: str, items: list[dict[str, Any]]) -> None:
    response = await api.post(f"{BASE}/{bank}/memories", json={"items": items})
    assert response.status_code == 200, response.text


async def recall(api: httpx.AsyncClient, bank: str, query: str, **options: Any) -> list[Any]:
    response = await api.post(
        f"{BASE}/{bank}/memories/recall", json={"query": query, "budget": "low", **options}
    )
    assert response.status_code == 200, response.text
    return list(response.json()["results"])


async def fact_id(pool: Pool, bank: str, needle: str) -> str:
    async with pool.acquire() as conn:
        found = await conn.fetchval(
            "SELECT id::text FROM memory_units WHERE bank_id = $1 AND text LIKE $2"
            # Consolidation may already have written an observation with the same words.
            " AND fact_type <> 'observation'",
            bank,
            f"%{needle}%",
        )
    assert found is not None, needle
    return str(found)


async def test_states_validity_and_reinforcement(
    api: httpx.AsyncClient, app: Starlette, pool: Pool, bank_id: str
) -> None:
    await retain(
        api,
        bank_id,
        [
            {
                "content": "Maya lives in Lisbon.",
                "document_id": "a",
                "timestamp": "2025-01-10T10:00:00Z",
            },
            {
                "content": "Maya moved to Porto in June.",
                "document_id": "b",
                "timestamp": "2025-06-20T10:00:00Z",
            },
            {
                "content": "Maya prefers green tea over coffee.",
                "document_id": "c",
                "timestamp": "2025-02-01T10:00:00Z",
            },
        ],
    )
    lisbon = await fact_id(pool, bank_id, "Lisbon")
    porto = await fact_id(pool, bank_id, "Porto")
    tea = await fact_id(pool, bank_id, "green tea")
    async with pool.acquire() as conn:
        stored = await conn.fetchrow(
            "SELECT importance, strength, state, valid_from FROM memory_units WHERE id = $1", tea
        )
        assert stored is not None
        assert stored["state"] == "active" and stored["strength"] == stored["importance"] >= 0.6
        # Retain applied the local rule (same subject, residence, another city) ...
        state = await conn.fetchval("SELECT state FROM memory_units WHERE id = $1", lisbon)
        assert state == "superseded"
        # ... and applying it again is a no-op.
        async with conn.transaction():
            assert not await supersede(conn, bank_id, Supersession(lisbon, porto, "moved"))
        await conn.execute("UPDATE memory_units SET state = 'archived' WHERE id = $1", tea)

    current = [r["id"] for r in await recall(api, bank_id, "Where does Maya live?")]
    assert porto in current and lisbon not in current and tea not in current

    both = await recall(api, bank_id, "Where does Maya live?", include_superseded=True)
    order = [r["id"] for r in both]
    assert order.index(porto) < order.index(lisbon)  # the current fact first
    old = both[order.index(lisbon)]
    assert old["state"] == "superseded" and old["superseded_by"] == porto
    # valid_to is the successor's start: the move happened in June (said on the 20th)
    assert old["valid_to"].startswith("2025-06-01")

    archived = await recall(api, bank_id, "What does Maya drink?", include_archived=True)
    assert tea in [r["id"] for r in archived]

    then = [
        r["id"]
        for r in await recall(api, bank_id, "Where does Maya live?", as_of="2025-03-01T00:00:00Z")
    ]
    assert lisbon in then and porto not in then  # valid then, as known then
    # ... and ranked as what was current then: superseded *now* does not demote it below the
    # (since archived) tea fact, which matches the question worse.
    assert then[0] == lisbon

    services = app.state.services
    assert services.access.pending > 0  # recorded, not yet written
    async with pool.acquire() as conn:
        before = (await access_states(conn, bank_id, [porto]))[porto]
    assert await services.access.flush() > 0
    async with pool.acquire() as conn:
        after = (await access_states(conn, bank_id, [porto]))[porto]
    assert after.access_count > before.access_count
    assert before.strength < after.strength <= 1.0
    assert after.last_accessed_at is not None


async def test_bad_as_of_is_a_400_naming_the_field(api: httpx.AsyncClient, bank_id: str) -> None:
    await retain(api, bank_id, [{"content": "Ravi plays the cello."}])
    response = await api.post(
        f"{BASE}/{bank_id}/memories/recall", json={"query": "cello", "as_of": "last tuesdayish"}
    )
    assert response.status_code == 400 and response.json()["field"] == "as_of"


async def test_a_changed_preference_supersedes_the_old_one(
    api: httpx.AsyncClient, pool: Pool, bank_id: str
) -> None:
    await retain(
        api,
        bank_id,
        [
            {
                "content": "Please keep your answers short.",
                "document_id": "p1",
                "timestamp": "2025-03-01T09:00:00Z",
            },
        ],
    )
    await retain(
        api,
        bank_id,
        [
            {
                "content": "From now on, give me every step in detail.",
                "document_id": "p2",
                "timestamp": "2025-03-15T09:00:00Z",
            },
            {
                "content": "我现在搬到上海了。",
                "document_id": "z2",
                "timestamp": "2025-03-16T09:00:00Z",
            },
        ],
    )
    short = await fact_id(pool, bank_id, "short")
    detail = await fact_id(pool, bank_id, "every step")
    results = await recall(api, bank_id, "How should answers be written?", include_superseded=True)
    order = [r["id"] for r in results]
    assert order.index(detail) < order.index(short)
    old = results[order.index(short)]
    assert old["state"] == "superseded" and old["superseded_by"] == detail
    assert old["valid_to"].startswith("2025-03-15")
    assert short not in [r["id"] for r in await recall(api, bank_id, "answer length")]
    async with pool.acquire() as conn:
        importance = await conn.fetchval(
            "SELECT importance FROM memory_units WHERE id = $1", detail
        )
    assert importance >= 0.6  # a stated preference
    history = await api.get(f"{BASE}/{bank_id}/memories/{short}/history")
    assert history.status_code == 200, history.text
    changes = history.json()
    assert changes[0]["change"] == "superseded" and changes[0]["related_id"] == detail


async def test_chinese_cues_supersede(api: httpx.AsyncClient, pool: Pool, bank_id: str) -> None:
    # The local extractor keeps no Chinese sentences yet: the chunk is the fact here.
    made = await api.put(f"{BASE}/{bank_id}", json={"extraction_mode": "none"})
    assert made.status_code == 200, made.text
    await retain(api, bank_id, [{"content": "我住在北京。", "timestamp": "2025-03-01T09:00:00Z"}])
    await retain(
        api, bank_id, [{"content": "我现在搬到上海了。", "timestamp": "2025-03-16T09:00:00Z"}]
    )
    beijing = await fact_id(pool, bank_id, "北京")
    shanghai = await fact_id(pool, bank_id, "上海")
    async with pool.acquire() as conn:
        row = await conn.fetchrow(
            "SELECT state, superseded_by::text AS successor FROM memory_units WHERE id = $1",
            beijing,
        )
    assert row is not None and row["state"] == "superseded" and row["successor"] == shanghai


async def test_an_older_fact_arriving_late_is_the_superseded_one(
    api: httpx.AsyncClient, pool: Pool, bank_id: str
) -> None:
    await retain(
        api, bank_id, [{"content": "Theo lives in Ghent.", "timestamp": "2025-06-01T10:00:00Z"}]
    )
    await retain(
        api, bank_id, [{"content": "Theo lives in Bruges.", "timestamp": "2025-01-01T10:00:00Z"}]
    )
    ghent = await fact_id(pool, bank_id, "Ghent")
    bruges = await fact_id(pool, bank_id, "Bruges")
    async with pool.acquire() as conn:
        rows = {
            str(r["id"]): (r["state"], r["successor"])
            for r in await conn.fetch(
                "SELECT id, state, superseded_by::text AS successor FROM memory_units"
                " WHERE bank_id = $1",
                bank_id,
            )
        }
    assert rows[bruges] == ("superseded", ghent) and rows[ghent] == ("active", None)


async def test_reflect_citations_reinforce_at_the_banks_step(
    api: httpx.AsyncClient, app: Starlette, pool: Pool, bank_id: str
) -> None:
    await retain(api, bank_id, [{"content": "Ravi plays the cello in an orchestra."}])
    patched = await api.patch(
        f"{BASE}/{bank_id}/config", json={"updates": {"lifecycle": {"reinforce_step": 0.5}}}
    )
    assert patched.status_code == 200, patched.text
    cello = await fact_id(pool, bank_id, "cello")
    services = app.state.services
    await services.access.flush()  # nothing of this bank pending before reflect
    async with pool.acquire() as conn:
        before = (await access_states(conn, bank_id, [cello]))[cello].strength
    answer = await api.post(
        f"{BASE}/{bank_id}/reflect", json={"query": "Which instrument does Ravi play?"}
    )
    assert answer.status_code == 200, answer.text
    # No LLM here: the answer rests on the evidence it lists, the cello fact among it.
    assert cello in [m["id"] for m in answer.json()["based_on"]["memories"]]
    assert await services.access.flush() == 1
    async with pool.acquire() as conn:
        after = (await access_states(conn, bank_id, [cello]))[cello]
    assert after.access_count == 1
    # one access at step 0.5 (the bank's), not the default 0.2
    assert abs(after.strength - (1 - (1 - before) * 0.5)) < 1e-6


async def test_neither_a_flush_nor_the_lifecycle_waits_for_the_other(
    api: httpx.AsyncClient, pool: Pool, bank_id: str
) -> None:
    """A flush writes beside the fact, so a writer holding the fact's row does not hold it
    up (before migration 0041 the flush skipped that fact and lost its accesses); the
    lifecycle folding accesses skips a side row a flush holds and leaves it for its next
    run, losing nothing."""
    await retain(api, bank_id, [{"content": "Uma plays the cello. Uma lives in Porto."}])
    held, free = await fact_id(pool, bank_id, "cello"), await fact_id(pool, bank_id, "Porto")
    async with pool.acquire() as writer, writer.transaction():
        await writer.execute(
            "SELECT 1 FROM memory_units WHERE id = ANY($1::uuid[]) FOR UPDATE", [held, free]
        )
        async with pool.acquire() as conn:
            written = await asyncio.wait_for(
                reinforce(conn, bank_id, {held: 1, free: 2}, datetime.now(UTC)), 30
            )
    assert written == 2
    async with pool.acquire() as flush, flush.transaction():
        assert await reinforce(flush, bank_id, {held: 1}, datetime.now(UTC)) == 1
        async with pool.acquire() as conn, conn.transaction():
            assert await asyncio.wait_for(fold_range(conn, bank_id, None, None), 30) == 1
    async with pool.acquire() as conn:
        states = await access_states(conn, bank_id, [held, free])
        pending = await conn.fetchval(
            "SELECT accesses FROM fact_access WHERE bank_id = $1 AND fact_id = $2", bank_id, held
        )
    assert {i: s.access_count for i, s in states.items()} == {held: 2, free: 2}
    assert pending == 2  # still beside the fact, for the next fold


async def test_a_flush_writes_no_fact_row_and_the_lifecycle_folds_it_in(
    api: httpx.AsyncClient, pool: Pool, bank_id: str
) -> None:
    """Reinforcement writes no version of a fact's ~1.3 kB row (migration 0041): a second
    flush rewrites only the narrow side rows, in place (HOT). Readers — the API's memory —
    see the reinforced values; the lifecycle batch folds them into the facts and decays them
    in one row version each, leaving no side row."""
    response = await api.put(f"{BASE}/{bank_id}", json={"enable_observations": False})
    assert response.status_code == 200, response.text
    sentences = " ".join(f"Ines planted tree number {n} in the orchard." for n in range(12))
    await retain(api, bank_id, [{"content": sentences}])
    async with pool.acquire() as conn:
        ids = [
            str(i)
            for i in await conn.fetchval(
                "SELECT array_agg(id ORDER BY id) FROM memory_units WHERE bank_id = $1", bank_id
            )
        ]
        before = await access_states(conn, bank_id, ids)
        assert await reinforce(conn, bank_id, dict.fromkeys(ids, 2), datetime.now(UTC)) == len(ids)
        async with conn.transaction():
            assert await reinforce(conn, bank_id, dict.fromkeys(ids, 1), datetime.now(UTC)) == len(
                ids
            )
            writes = await conn.fetchrow(
                "SELECT pg_stat_get_xact_tuples_updated('memory_units'::regclass) AS facts,"
                " pg_stat_get_xact_tuples_hot_updated('fact_access'::regclass) AS in_place"
            )
        assert writes is not None and writes["facts"] == 0 and writes["in_place"] == len(ids)
        seen = await access_states(conn, bank_id, ids)
    for i in ids:
        assert seen[i].access_count == before[i].access_count + 3
        assert abs(seen[i].strength - (1 - (1 - before[i].strength) * 0.8**3)) < 1e-6
    shown = await api.get(f"{BASE}/{bank_id}/memories/{ids[0]}")
    assert shown.status_code == 200, shown.text
    assert shown.json()["access_count"] == seen[ids[0]].access_count
    assert abs(shown.json()["strength"] - seen[ids[0]].strength) < 1e-6

    # The lifecycle ten days on (decay at 0.99 a day, not scaled by importance), merging none
    # of these near-duplicates: each fact folded and decayed in one row version, reinforced
    # first, then decayed.
    policy = LifecyclePolicy(merge_duplicates=False, importance_scaled_decay=False)
    async with pool.acquire() as conn:
        since = {
            r["id"]: r["since"]
            for r in await conn.fetch(
                "SELECT id::text, greatest(mentioned_at, created_at) AS since FROM memory_units"
                " WHERE bank_id = $1",
                bank_id,
            )
        }
        now = max(since.values()) + timedelta(days=10)
        async with conn.transaction():
            first = await run_batch(conn, bank_id, policy, now, None, size=5)
            versions = await conn.fetchval(
                "SELECT pg_stat_get_xact_tuples_updated('memory_units'::regclass)"
            )
        assert first.decayed == 5 and versions == 5
        left = await conn.fetchval("SELECT count(*) FROM fact_access WHERE bank_id = $1", bank_id)
        assert left == len(ids) - 5  # the first batch folded its range of ids only
        after = first.last_id
        while (batch := await run_batch(conn, bank_id, policy, now, after, 5)).last_id:
            after = batch.last_id
        stored = await conn.fetch(
            "SELECT id::text, access_count, strength FROM memory_units WHERE bank_id = $1",
            bank_id,
        )
        left = await conn.fetchval("SELECT count(*) FROM fact_access WHERE bank_id = $1", bank_id)
    assert left == 0
    for row in stored:
        days = (now - since[row["id"]]).total_seconds() / 86400
        assert row["access_count"] == seen[row["id"]].access_count
        assert abs(row["strength"] - seen[row["id"]].strength * 0.99**days) < 1e-6
