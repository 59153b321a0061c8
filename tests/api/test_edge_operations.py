"""Issue 18's "also seen" list on the write side: repeated items stored once, a cancelled stuck
retain reads `cancelled`, and a bank deleted during its consolidation leaves nothing behind."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
from prometheus_client import CollectorRegistry
from support.operations import finished_operation
from temporalio import activity
from temporalio.client import WorkflowExecutionStatus
from temporalio.testing import WorkflowEnvironment

from engine.db import Pool
from engine.embedding import Embedder
from engine.retain.payloads import UpsertBatch, UpsertBatchResult
from engine.settings import Settings
from worker.main import Workers, WorkerServices, build_worker
from worker.metrics import ActivityMetrics, MetricsInterceptor
from workflows.consolidation import consolidation_workflow_id

BASE = "/v1/default/banks"


def worker_with(
    client: Any, settings: Settings, services: WorkerServices, name: str, replacement: Any
) -> Workers:
    """The production worker with activity `name` replaced by `replacement`."""
    metrics = MetricsInterceptor(ActivityMetrics(CollectorRegistry()))
    return build_worker(client, settings.task_queue, services, metrics, {name: replacement})


async def chunk_texts(api: httpx.AsyncClient, bank: str, document: str) -> list[str]:
    response = await api.get(f"{BASE}/{bank}/documents/{document}/chunks")
    assert response.status_code == 200, response.text
    return [c["chunk_text"] for c in response.json()["items"]]


async def test_identical_items_of_one_document_are_stored_once(
    api: httpx.AsyncClient, bank_id: str
) -> None:
    item = {"content": "Lena fixed a bicycle in Tallinn.", "document_id": "d1"}
    other = {"content": "Lena then rode it to the sea.", "document_id": "d1"}
    twice = await api.post(f"{BASE}/{bank_id}/memories", json={"items": [item, other, item]})
    once = await api.post(f"{BASE}/{bank_id}-once/memories", json={"items": [item, other]})
    assert twice.status_code == once.status_code == 200, (twice.text, once.text)
    assert twice.json()["facts_added"] == once.json()["facts_added"] > 0
    stored = await chunk_texts(api, bank_id, "d1")
    assert stored == await chunk_texts(api, f"{bank_id}-once", "d1")
    assert sum(text.count("Tallinn") for text in stored) == 1


async def test_a_cancelled_stuck_retain_reads_cancelled(
    plain_api: httpx.AsyncClient,
    temporal_env: WorkflowEnvironment,
    settings: Settings,
    pool: Pool,
    embedder: Embedder,
    cpu: ThreadPoolExecutor,
    bank_id: str,
) -> None:
    attempts = asyncio.Queue[int]()

    @activity.defn(name="upsert_documents")
    async def always_fails(job: UpsertBatch) -> UpsertBatchResult:
        attempts.put_nowait(activity.info().attempt)
        raise RuntimeError("the database keeps refusing this document")

    services = WorkerServices(pool, embedder, cpu, None)
    op = f"stuck-{bank_id}"
    body = {"items": [{"content": "Kenji ran in Osaka."}], "async": True, "operation_id": op}
    async with worker_with(
        temporal_env.client, settings, services, "upsert_documents", always_fails
    ):
        assert (await plain_api.post(f"{BASE}/{bank_id}/memories", json=body)).status_code == 200
        while await asyncio.wait_for(attempts.get(), 60) < 2:  # retried: it is stuck
            pass
        cancel = await plain_api.delete(f"{BASE}/{bank_id}/operations/{op}")
        assert cancel.status_code == 200, cancel.text
        final = await finished_operation(plain_api, bank_id, op)
    assert final["status"] == "cancelled", final
    assert final["error_message"] == "cancelled"


async def test_deleting_a_bank_during_its_consolidation_leaves_no_operation_behind(
    plain_api: httpx.AsyncClient,
    temporal_env: WorkflowEnvironment,
    settings: Settings,
    pool: Pool,
    embedder: Embedder,
    cpu: ThreadPoolExecutor,
    bank_id: str,
) -> None:
    entered = asyncio.Event()

    @activity.defn(name="consolidate_batch")
    async def busy_until_cancelled(request: Any) -> Any:
        entered.set()
        while True:  # a long batch: it ends only when the cancellation reaches it
            activity.heartbeat()
            await asyncio.sleep(0.1)

    services = WorkerServices(pool, embedder, cpu, None)
    item = {"content": "Maya visited an old friend in Cusco.", "timestamp": "2024-03-01"}
    async with worker_with(
        temporal_env.client, settings, services, "consolidate_batch", busy_until_cancelled
    ):
        retained = await plain_api.post(f"{BASE}/{bank_id}/memories", json={"items": [item]})
        assert retained.status_code == 200, retained.text
        await asyncio.wait_for(entered.wait(), 60)
        deleted = await plain_api.delete(f"{BASE}/{bank_id}")
        assert deleted.status_code == 200, deleted.text
        handle = temporal_env.client.get_workflow_handle(consolidation_workflow_id(bank_id))
        assert (await handle.describe()).status != WorkflowExecutionStatus.RUNNING
    assert (await plain_api.put(f"{BASE}/{bank_id}", json={})).status_code == 200
    operations = await plain_api.get(f"{BASE}/{bank_id}/operations")
    assert operations.json()["operations"] == [], operations.text
    async with pool.acquire() as conn:
        left = await conn.fetchval("SELECT count(*) FROM operations WHERE bank_id = $1", bank_id)
    assert left == 0


async def test_a_cancelled_failing_import_reads_cancelled(
    plain_api: httpx.AsyncClient,
    temporal_env: WorkflowEnvironment,
    settings: Settings,
    pool: Pool,
    embedder: Embedder,
    cpu: ThreadPoolExecutor,
    bank_id: str,
) -> None:
    attempts = asyncio.Queue[int]()

    @activity.defn(name="upsert_documents")
    async def always_fails(job: UpsertBatch) -> UpsertBatchResult:
        attempts.put_nowait(activity.info().attempt)
        raise RuntimeError("the database keeps refusing this document")

    services = WorkerServices(pool, embedder, cpu, None)
    line = '{"conversation_id": "c", "role": "user", "content": "Kenji ran in Osaka."}'
    async with worker_with(
        temporal_env.client, settings, services, "upsert_documents", always_fails
    ):
        started = await plain_api.post(
            f"{BASE}/{bank_id}/import", json={"content": line, "name": "chat.jsonl"}
        )
        assert started.status_code == 202, started.text
        op = started.json()["operation_id"]
        while await asyncio.wait_for(attempts.get(), 60) < 2:
            pass
        cancel = await plain_api.delete(f"{BASE}/{bank_id}/operations/{op}")
        assert cancel.status_code == 200, cancel.text
        final = await finished_operation(plain_api, bank_id, op)
    assert final["status"] == "cancelled", final
    assert final["error_message"] == "cancelled"


async def test_a_cancelled_failing_consolidation_reads_cancelled(
    plain_api: httpx.AsyncClient,
    temporal_env: WorkflowEnvironment,
    settings: Settings,
    pool: Pool,
    embedder: Embedder,
    cpu: ThreadPoolExecutor,
    bank_id: str,
) -> None:
    attempts = asyncio.Queue[int]()

    @activity.defn(name="consolidate_batch")
    async def always_fails(request: Any) -> Any:
        attempts.put_nowait(activity.info().attempt)
        raise RuntimeError("the observation store keeps refusing this batch")

    services = WorkerServices(pool, embedder, cpu, None)
    item = {"content": "Maya visited an old friend in Cusco.", "timestamp": "2024-03-01"}
    async with worker_with(
        temporal_env.client, settings, services, "consolidate_batch", always_fails
    ):
        retained = await plain_api.post(f"{BASE}/{bank_id}/memories", json={"items": [item]})
        assert retained.status_code == 200, retained.text
        while await asyncio.wait_for(attempts.get(), 60) < 2:
            pass
        listed = (await plain_api.get(f"{BASE}/{bank_id}/operations")).json()["operations"]
        [op] = [o["id"] for o in listed if o["task_type"] == "consolidation"]
        cancel = await plain_api.delete(f"{BASE}/{bank_id}/operations/{op}")
        assert cancel.status_code == 200, cancel.text
        final = await finished_operation(plain_api, bank_id, op)
    assert final["status"] == "cancelled", final
    assert final["error_message"] == "cancelled"
