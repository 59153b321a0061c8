"""One small bank per module, retained once through the real pipeline (API → Temporal worker →
PostgreSQL); the recall tests then only read it, through an app with no worker of its own."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry
from temporalio.testing import WorkflowEnvironment

from engine.db import Pool, create_pool, migrate
from engine.embedding import Embedder
from engram.postgres import EmbeddedPostgres
from recall.recall_support import (
    BASE,
    CJK_ITEMS,
    OBSERVED_ITEMS,
    WINDOW_ITEMS,
    Banks,
    corpus,
    depth_items,
    recall_app,
    thread_items,
)
from server.services import Services
from worker.main import WorkerServices, build_worker
from worker.metrics import ActivityMetrics, MetricsInterceptor


async def _retain(client: httpx.AsyncClient, bank: str, items: list[dict[str, Any]]) -> None:
    response = await client.post(f"{BASE}/{bank}/memories", json={"items": items})
    assert response.status_code == 200, response.text


@pytest.fixture(scope="session")
async def recall_pool(postgres: EmbeddedPostgres, embedder: Embedder) -> AsyncIterator[Pool]:
    """A database of its own, so every recall test module reads the same retained banks."""
    dsn = postgres.create_database("t_recall_corpus")
    await migrate(dsn, embedder.dimension, embedder.space)
    pool = await create_pool(dsn, max_size=8)
    yield pool
    await pool.close()


@pytest.fixture(scope="session")
async def banks(
    tmp_path_factory: pytest.TempPathFactory,
    temporal_env: WorkflowEnvironment,
    recall_pool: Pool,
    embedder: Embedder,
    cpu: ThreadPoolExecutor,
) -> Banks:
    application = recall_app(
        tmp_path_factory.mktemp("recall"), recall_pool, temporal_env, embedder, cpu
    )
    services: Services = application.state.services
    interceptor = MetricsInterceptor(ActivityMetrics(CollectorRegistry()))
    running = build_worker(
        temporal_env.client,
        services.settings.task_queue,
        WorkerServices(recall_pool, embedder, cpu, None),
        interceptor,
    )
    main, cjk = f"recall-{uuid.uuid4().hex[:8]}", f"recall-cjk-{uuid.uuid4().hex[:8]}"
    observed = f"recall-obs-{uuid.uuid4().hex[:8]}"
    window = f"recall-window-{uuid.uuid4().hex[:8]}"
    by_conversation = f"recall-conv-{uuid.uuid4().hex[:8]}"
    by_message = f"recall-msg-{uuid.uuid4().hex[:8]}"
    depth = f"recall-depth-{uuid.uuid4().hex[:8]}"
    transport = httpx.ASGITransport(app=application)
    async with running, httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        await _retain(client, main, corpus())
        put = await client.put(f"{BASE}/{cjk}", json={"extraction_mode": "none"})
        assert put.status_code == 200, put.text
        await _retain(client, cjk, CJK_ITEMS)
        await _retain(client, observed, OBSERVED_ITEMS)
        await _retain(client, window, WINDOW_ITEMS)
        await _retain(client, by_conversation, thread_items(per_message=False))
        await _retain(client, by_message, thread_items(per_message=True))
        await _retain(client, depth, depth_items())
        facts = []
        for bank in (main, observed, window, depth):
            listed = await client.get(f"{BASE}/{bank}/memories/list", params={"limit": "1000"})
            facts += listed.json()["items"]
    ids: dict[str, str] = {}
    for fact in facts:
        assert fact["document_id"] not in ids, f"one fact per item expected: {fact}"
        ids[fact["document_id"]] = fact["id"]
    return Banks(main, cjk, observed, window, by_conversation, by_message, depth, ids)


@pytest.fixture
async def client(
    tmp_path: Path,
    temporal_env: WorkflowEnvironment,
    recall_pool: Pool,
    embedder: Embedder,
    cpu: ThreadPoolExecutor,
) -> AsyncIterator[httpx.AsyncClient]:
    """A fresh app over the recall database, without a worker: recall never touches Temporal."""
    application = recall_app(tmp_path, recall_pool, temporal_env, embedder, cpu)
    transport = httpx.ASGITransport(app=application)
    async with httpx.AsyncClient(transport=transport, base_url="http://engram.test") as c:
        yield c
