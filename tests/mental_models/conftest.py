"""Mental-model tests run the production worker with ReflectWorkflow replaced by a stub."""

from __future__ import annotations

from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from support.shutdown_watch import watched
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from activities.failures import FailureInterceptor
from engine.db import Pool
from engine.embedding import Embedder
from engine.settings import Settings
from mental_models.reflect_stub import StubReflectActivities, StubReflectWorkflow
from worker.heartbeat import HeartbeatInterceptor
from worker.main import WORKFLOWS, Workers, WorkerServices, activities_of, embed_worker


@pytest.fixture
async def worker(
    temporal_env: WorkflowEnvironment,
    settings: Settings,
    pool: Pool,
    embedder: Embedder,
    cpu: ThreadPoolExecutor,
) -> AsyncIterator[Workers]:
    services = WorkerServices(pool, embedder, cpu, None)
    workflows = [w for w in WORKFLOWS if w.__name__ != "ReflectWorkflow"]
    activities = activities_of(services)
    interceptors = [FailureInterceptor(), HeartbeatInterceptor()]
    running = Workers(
        Worker(
            temporal_env.client,
            task_queue=settings.task_queue,
            workflows=[*workflows, StubReflectWorkflow],
            activities=[*activities, StubReflectActivities(pool).stub_reflect_facts],
            interceptors=interceptors,
        ),
        embed_worker(
            temporal_env.client,
            settings.task_queue,
            next(a for a in activities if a.__name__ == "embed_facts"),
            interceptors,
        ),
    )
    async with watched(running):
        yield running
