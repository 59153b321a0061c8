"""The scheduled lifecycle: the bank's schedule comes and goes with the bank; a run decays,
archives small talk while an important fact survives, merges near-duplicates, is idempotent
at the same "now", records an operation and counts in the worker's metrics; new evidence
restores an archived fact."""

from __future__ import annotations

from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from temporalio.api.enums.v1 import EventType
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from engine.db import Pool
from engine.embedding import Embedder
from engine.lifecycle.payloads import LifecycleRequest
from engine.lifecycle.schedule import lifecycle_schedule_id
from engine.settings import Settings
from worker.main import Workers, WorkerServices, build_worker
from worker.metrics import ActivityMetrics, MetricsInterceptor
from workflows.lifecycle import LifecycleWorkflow

BASE = "/v1/default/banks"
# Decay counts from when a memory entered the bank (stored, or said if later), so the
# simulated days start after the moment the test stores them: day(n) is n days after that.
DAY0 = datetime.now(UTC).replace(hour=10, minute=0, second=0, microsecond=0) + timedelta(days=1)


def day(n: float) -> str:
    return (DAY0 + timedelta(days=n)).isoformat()


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
async def worker(
    temporal_env: WorkflowEnvironment,
    settings: Settings,
    pool: Pool,
    embedder: Embedder,
    cpu: ThreadPoolExecutor,
    registry: CollectorRegistry,
) -> AsyncIterator[Workers]:
    """The production worker, with a metrics registry this test can read."""
    services = WorkerServices(pool, embedder, cpu, None)
    interceptor = MetricsInterceptor(ActivityMetrics(registry))
    running = build_worker(temporal_env.client, settings.task_queue, services, interceptor)
    async with running:
        yield running


async def retain(api: httpx.AsyncClient, bank: str, items: list[dict[str, Any]]) -> None:
    response = await api.post(f"{BASE}/{bank}/memories", json={"items": items})
    assert response.status_code == 200, response.text


async def run(api: httpx.AsyncClient, bank: str, now: str) -> dict[str, int]:
    response = await api.post(f"{BASE}/{bank}/lifecycle/run", json={"now": now})
    assert response.status_code == 200, response.text
    counts: dict[str, int] = response.json()["counts"]
    return counts


async def states(pool: Pool, bank: str) -> dict[str, str]:
    async with pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT text, state FROM memory_units"
            " WHERE bank_id = $1 AND fact_type <> 'observation'",
            bank,
        )
    return {r["text"]: r["state"] for r in rows}


async def test_schedule_decay_archive_merge_and_restore(
    api: httpx.AsyncClient,
    temporal_env: WorkflowEnvironment,
    pool: Pool,
    bank_id: str,
    registry: CollectorRegistry,
) -> None:
    made = await api.put(
        f"{BASE}/{bank_id}", json={"extraction_mode": "none", "enable_observations": False}
    )
    assert made.status_code == 200, made.text
    handle = temporal_env.client.get_schedule_handle(lifecycle_schedule_id(bank_id))
    described = await handle.describe()
    # Temporal keeps the cron as a calendar: daily at 03:17.
    [calendar] = described.schedule.spec.calendars
    assert [(r.start, r.end) for r in calendar.hour] == [(3, 3)]
    assert [(r.start, r.end) for r in calendar.minute] == [(17, 17)]

    start = day(0)
    await retain(
        api,
        bank_id,
        [
            {"content": "The weather is nice today, haha.", "timestamp": start},
            {"content": "Nadia decided to move to Berlin in May.", "timestamp": start},
            {"content": "Nadia's sister Ines lives in Madrid.", "timestamp": start},
            {"content": "Nadia's sister Ines lives in Madrid!", "timestamp": start},
        ],
    )
    first = await run(api, bank_id, day(73))  # 73 days: strength x0.48
    assert first["scanned"] == 4 and first["decayed"] == 4
    assert first["archived"] == 1 and first["merged"] == 1 and first["deleted"] == 0
    now = await states(pool, bank_id)
    assert now["The weather is nice today, haha."] == "archived"
    assert now["Nadia decided to move to Berlin in May."] == "active"
    madrid = sorted(s for t, s in now.items() if "Madrid" in t)
    assert madrid == ["active", "archived"]  # one absorbed into the other
    async with pool.acquire() as conn:
        merged = await conn.fetchrow(
            "SELECT proof_count FROM memory_units WHERE bank_id = $1 AND text LIKE '%Madrid%'"
            " AND state = 'active'",
            bank_id,
        )
        operation = await conn.fetchrow(
            "SELECT status, result FROM operations WHERE bank_id = $1 AND kind = 'lifecycle'",
            bank_id,
        )
    assert merged is not None and merged["proof_count"] == 2
    assert operation is not None and operation["status"] == "completed"
    assert operation["result"]["archived"] == 1

    again = await run(api, bank_id, day(73))  # same "now": nothing changes
    assert again["decayed"] == 0 and again["archived"] == 0 and again["merged"] == 0

    metrics = generate_latest(registry).decode()
    assert 'engram_lifecycle_facts_total{action="archived"} 1.0' in metrics
    assert 'engram_lifecycle_facts_total{action="merged"} 1.0' in metrics

    # New evidence for the archived fact brings it back.
    await retain(
        api, bank_id, [{"content": "The weather is nice today, haha!", "timestamp": start}]
    )
    assert (await states(pool, bank_id))["The weather is nice today, haha."] == "active"

    deleted = await api.delete(f"{BASE}/{bank_id}")
    assert deleted.status_code == 200
    with pytest.raises(RPCError):
        await handle.describe()


async def test_delete_is_opt_in(api: httpx.AsyncClient, pool: Pool, bank_id: str) -> None:
    made = await api.put(
        f"{BASE}/{bank_id}",
        json={
            "extraction_mode": "none",
            "enable_observations": False,
            "lifecycle": {
                "delete_archived": True,
                "delete_after_days": 90,
                "delete_below_importance": 0.3,
            },
        },
    )
    assert made.status_code == 200, made.text
    await retain(
        api,
        bank_id,
        [
            {"content": "Ok, cool.", "timestamp": day(0)},
            {"content": "Nadia is allergic to peanuts.", "timestamp": day(0)},
        ],
    )
    first = await run(api, bank_id, day(73))
    assert first["archived"] == 1 and first["deleted"] == 0  # the small talk, 73 days old
    counts = await run(api, bank_id, day(120))  # 120 days untouched: deleted
    assert counts["deleted"] == 1
    assert list(await states(pool, bank_id)) == ["Nadia is allergic to peanuts."]
    bad = await api.put(f"{BASE}/{bank_id}", json={"lifecycle": {"decay_rate": 2}})
    assert bad.status_code == 400 and bad.json()["field"] == "lifecycle.decay_rate"


async def test_important_facts_outlive_small_talk(
    api: httpx.AsyncClient, pool: Pool, bank_id: str
) -> None:
    """Decay scaled by importance, and an attribute's current value kept (maintenance.py)."""
    made = await api.put(
        f"{BASE}/{bank_id}", json={"extraction_mode": "none", "enable_observations": False}
    )
    assert made.status_code == 200, made.text
    start = day(0)
    talk, daughter, home = (
        "The weather is nice today, haha.",
        "Nadia's daughter is named Ines.",
        "Nadia lives in Lisbon.",
    )
    await retain(api, bank_id, [{"content": t, "timestamp": start} for t in (talk, daughter, home)])
    await run(api, bank_id, day(55))  # 55 days: small talk (0.2) goes
    assert await states(pool, bank_id) == {talk: "archived", daughter: "active", home: "active"}
    # 200 days: unscaled, 0.6 · 0.99^200 = 0.08 would be archived; scaled, the daughter's
    # clock ran at (1 − 0.6) / (1 − 0.4) of the days.
    second = await run(api, bank_id, day(200))
    assert second["archived"] == 0
    async with pool.acquire() as conn:
        strength = await conn.fetchval(
            "SELECT strength FROM memory_units WHERE bank_id = $1 AND text = $2", bank_id, daughter
        )
    assert strength == pytest.approx(0.6 * 0.99 ** (200 * 0.4 / 0.6), rel=1e-6)
    # 400 days: both are weaker than 0.1; the only residence Nadia has stays.
    await run(api, bank_id, day(400))
    assert await states(pool, bank_id) == {talk: "archived", daughter: "archived", home: "active"}
    off = await api.patch(
        f"{BASE}/{bank_id}/config", json={"updates": {"lifecycle": {"keep_current_values": False}}}
    )
    assert off.status_code == 200, off.text
    assert (await run(api, bank_id, day(401)))["archived"] == 1
    bad = await api.put(f"{BASE}/{bank_id}", json={"lifecycle": {"keep_current_values": 1}})
    assert bad.status_code == 400 and bad.json()["field"] == "lifecycle.keep_current_values"


async def test_history_stored_today_starts_fresh(
    api: httpx.AsyncClient, pool: Pool, bank_id: str
) -> None:
    """Chat from two years ago imported today is not faded by two years: its dates made the
    first nightly run take every such fact for 730 days untouched and archive it."""
    made = await api.put(
        f"{BASE}/{bank_id}", json={"extraction_mode": "none", "enable_observations": False}
    )
    assert made.status_code == 200, made.text
    talk = "The weather is nice today, haha."
    said = (DAY0 - timedelta(days=731)).isoformat()
    await retain(api, bank_id, [{"content": talk, "timestamp": said}])
    assert (await run(api, bank_id, day(0)))["archived"] == 0
    assert (await states(pool, bank_id))[talk] == "active"
    assert (await run(api, bank_id, day(60)))["archived"] == 1  # small talk goes at ~52 days


async def test_a_large_run_continues_as_new_where_it_left_off(
    api: httpx.AsyncClient,
    temporal_env: WorkflowEnvironment,
    settings: Settings,
    pool: Pool,
    bank_id: str,
) -> None:
    made = await api.put(
        f"{BASE}/{bank_id}", json={"extraction_mode": "none", "enable_observations": False}
    )
    assert made.status_code == 200, made.text
    start = day(0)
    texts = ["Ok, cool, thanks.", "Lol that is funny.", "Nice, great.", "Sounds good, bye."]
    texts.append("Omar decided to learn the violin.")
    await retain(api, bank_id, [{"content": t, "timestamp": start} for t in texts])
    # Two memories a batch, one batch a run: four runs, one history each.
    handle = await temporal_env.client.start_workflow(
        LifecycleWorkflow.run,
        LifecycleRequest(
            bank_id, "api", DAY0 + timedelta(days=73), batches_per_run=1, batch_size=2
        ),
        id=f"lifecycle-test:{bank_id}",
        task_queue=settings.task_queue,
    )
    counts = await handle.result()  # follows the continued runs
    assert counts["scanned"] == 5 and counts["decayed"] == 5 and counts["archived"] == 4
    first = temporal_env.client.get_workflow_handle(handle.id, run_id=handle.first_execution_run_id)
    events = [e async for e in first.fetch_history_events()]
    assert events[-1].event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
    async with pool.acquire() as conn:
        operations = await conn.fetch(
            "SELECT status, result, progress FROM operations"
            " WHERE bank_id = $1 AND kind = 'lifecycle'",
            bank_id,
        )
    [operation] = operations  # one operation across the runs, with the whole run's counts
    assert operation["status"] == "completed" and operation["result"]["scanned"] == 5
    assert operation["progress"]["batches"] == 4  # 2 + 2 + 1 memories, then an empty batch
    assert (await states(pool, bank_id))["Omar decided to learn the violin."] == "active"
