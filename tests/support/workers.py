"""Workers for the durability tests: a real `python -m worker` process to kill mid-run, and
the in-process production worker that takes over from it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager, contextmanager

from prometheus_client import CollectorRegistry
from temporalio.testing import WorkflowEnvironment

from engine.db import Pool
from engine.embedding import Embedder
from engine.settings import Settings
from support.serve import free_port
from worker.main import Workers, WorkerServices, build_worker
from worker.metrics import ActivityMetrics, MetricsInterceptor


@contextmanager
def worker_process(
    settings: Settings, temporal_env: WorkflowEnvironment
) -> Iterator[subprocess.Popen[bytes]]:
    """`python -m worker` on the test's database, Temporal and task queue; killed on exit if
    the test has not killed it already."""
    env = dict(os.environ)
    env.update(
        {
            "ENGRAM_DATABASE_URL": settings.database_url,
            "ENGRAM_TEMPORAL_ADDRESS": temporal_env.client.service_client.config.target_host,
            "ENGRAM_TASK_QUEUE": settings.task_queue,
            "ENGRAM_WORKER_METRICS_PORT": str(free_port()),
        }
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "worker"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def kill(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL: no shutdown, no goodbye to Temporal, like a machine losing power."""
    process.send_signal(signal.SIGKILL)
    process.wait()


@asynccontextmanager
async def stores_held(pool: Pool) -> AsyncIterator[None]:
    """While inside, writes to memory_units wait (reads pass): a retain or an import extracts
    and stages its facts but stores none, so a worker killed inside dies mid-operation however
    slowly the host lets the test look (unheld, the rest of a small batch is stored in a
    couple of seconds after the first facts are staged)."""
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("LOCK TABLE memory_units IN EXCLUSIVE MODE")
        yield


def production_worker(
    temporal_env: WorkflowEnvironment,
    settings: Settings,
    pool: Pool,
    embedder: Embedder,
    cpu: ThreadPoolExecutor,
) -> Workers:
    """The worker `python -m worker` runs, in this process (use with `async with`)."""
    services = WorkerServices(pool, embedder, cpu, None)
    interceptor = MetricsInterceptor(ActivityMetrics(CollectorRegistry()))
    return build_worker(temporal_env.client, settings.task_queue, services, interceptor)
