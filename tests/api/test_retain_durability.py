"""Retain survives failures: a step that fails after committing, and a worker killed mid-run,
both end with exactly the facts of an undisturbed run."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry
from support.operations import finished_operation
from support.waiting import until
from support.workers import kill, production_worker, stores_held, worker_process
from temporalio import activity
from temporalio.testing import WorkflowEnvironment

from activities.pipeline import PipelineActivities
from engine.db import Pool
from engine.embedding import Embedder
from engine.retain.payloads import UpsertBatch, UpsertBatchResult
from engine.settings import Settings
from worker.main import Workers, WorkerServices, build_worker
from worker.metrics import ActivityMetrics, MetricsInterceptor

BASE = "/v1/default/banks"


def conversation(documents: int, turns: int) -> list[dict[str, Any]]:
    people = ["Ana", "Bruno", "Chen", "Dara"]
    places = ["Lisbon", "Osaka", "Quito", "Tallinn"]
    return [
        {
            "content": "\n".join(
                f"{people[t % 4]}: I visited {places[(d + t) % 4]} with {people[(t + 1) % 4]} "
                f"on day {t} of trip {d} and we tried {d * 7 + t} new dishes."
                for t in range(turns)
            ),
            "document_id": f"trip-{d}",
            "timestamp": f"2024-0{1 + d % 9}-1{d % 9}T10:00:00Z",
        }
        for d in range(documents)
    ]


async def fact_texts(api: httpx.AsyncClient, bank: str) -> list[str]:
    response = await api.get(f"{BASE}/{bank}/memories/list", params={"limit": "1000"})
    assert response.status_code == 200
    return sorted(item["text"] for item in response.json()["items"])


def flaky_worker(
    client: Any, settings: Settings, pool: Pool, embedder: Embedder, cpu: ThreadPoolExecutor
) -> Workers:
    """The production worker, except that upsert_documents fails once after committing."""
    real = PipelineActivities(pool)

    @activity.defn(name="upsert_documents")
    async def upsert_then_fail_once(job: UpsertBatch) -> UpsertBatchResult:
        result = await real.upsert_documents(job)
        if activity.info().attempt == 1:
            raise RuntimeError("worker lost right after the commit")
        return result

    services = WorkerServices(pool, embedder, cpu, None)
    metrics = MetricsInterceptor(ActivityMetrics(CollectorRegistry()))
    replacing = {"upsert_documents": upsert_then_fail_once}
    return build_worker(client, settings.task_queue, services, metrics, replacing)


async def test_a_step_failing_after_its_commit_is_retried_without_duplicates(
    plain_api: httpx.AsyncClient,
    temporal_env: WorkflowEnvironment,
    settings: Settings,
    pool: Pool,
    embedder: Embedder,
    cpu: ThreadPoolExecutor,
    bank_id: str,
) -> None:
    items = conversation(documents=3, turns=4)
    async with flaky_worker(temporal_env.client, settings, pool, embedder, cpu):
        flaky = await plain_api.post(f"{BASE}/{bank_id}/memories", json={"items": items})
        clean = await plain_api.post(f"{BASE}/{bank_id}-clean/memories", json={"items": items})
    assert flaky.status_code == 200, flaky.text
    assert clean.status_code == 200, clean.text
    texts = await fact_texts(plain_api, bank_id)
    assert texts == await fact_texts(plain_api, f"{bank_id}-clean")
    assert len(texts) == len(set(texts)) > 0


# A worker process started (its models loaded), then a takeover after the heartbeat timeout
# and two retains of 24 documents: minutes on a loaded 2-core host.
@pytest.mark.timeout(360)
async def test_a_worker_killed_mid_retain_is_replaced_and_nothing_is_lost_or_doubled(
    plain_api: httpx.AsyncClient,
    temporal_env: WorkflowEnvironment,
    settings: Settings,
    pool: Pool,
    embedder: Embedder,
    cpu: ThreadPoolExecutor,
    bank_id: str,
) -> None:
    items = conversation(documents=24, turns=6)
    with worker_process(settings, temporal_env) as victim:
        op = f"kill-{bank_id}"
        body = {"items": items, "async": True, "operation_id": op}
        async with stores_held(pool):
            posted = await plain_api.post(f"{BASE}/{bank_id}/memories", json=body)
            assert posted.status_code == 200, posted.text
            await until(  # the worker has extracted facts; none can be stored
                lambda: pool.fetchval(
                    "SELECT count(*) FROM staged_facts WHERE operation_id = $1", op
                ),
                lambda staged: staged > 0,
                "facts staged by the worker to be killed",
            )
            kill(victim)
        status = (await plain_api.get(f"{BASE}/{bank_id}/operations/{op}")).json()
        assert status["status"] != "completed", "the worker finished too soon"
        async with production_worker(temporal_env, settings, pool, embedder, cpu):
            final = await finished_operation(plain_api, bank_id, op, timeout=170)
            clean = await plain_api.post(f"{BASE}/{bank_id}-clean/memories", json={"items": items})
    assert final["status"] == "completed", final
    assert clean.status_code == 200, clean.text
    texts = await fact_texts(plain_api, bank_id)
    assert texts == await fact_texts(plain_api, f"{bank_id}-clean")
    assert len(texts) == len(set(texts)) > 0


async def test_a_cancelled_retain_stores_nothing_and_reports_cancelled(
    plain_api: httpx.AsyncClient,
    temporal_env: WorkflowEnvironment,
    settings: Settings,
    pool: Pool,
    embedder: Embedder,
    cpu: ThreadPoolExecutor,
    bank_id: str,
) -> None:
    op = f"cancel-{bank_id}"
    body = {"items": conversation(documents=2, turns=2), "async": True, "operation_id": op}
    assert (await plain_api.post(f"{BASE}/{bank_id}/memories", json=body)).status_code == 200
    cancel = await plain_api.delete(f"{BASE}/{bank_id}/operations/{op}")  # no worker yet
    assert cancel.status_code == 200 and cancel.json()["success"] is True
    async with production_worker(temporal_env, settings, pool, embedder, cpu):
        final = await finished_operation(plain_api, bank_id, op)
    assert final["status"] == "cancelled"
    assert await fact_texts(plain_api, bank_id) == []
    again = await plain_api.delete(f"{BASE}/{bank_id}/operations/{op}")
    assert again.status_code == 409
