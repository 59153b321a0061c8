"""Session-wide real services: one embedded PostgreSQL and one Temporal dev server.

Each test module gets its own database (so modules cannot see each other's rows) and each
test that runs a worker gets a fresh task queue.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import httpx
import pytest
from prometheus_client import CollectorRegistry
from starlette.applications import Starlette
from support.payload_key import TEST_CONVERTER, TEST_PAYLOAD_KEY
from support.shutdown_watch import watched
from temporalio.testing import WorkflowEnvironment

from engine.db import Pool, create_pool, migrate
from engine.embedding import Embedder, load_embedder
from engine.llm import LLMClient
from engine.settings import LLMSettings, Settings
from engine.store.llm_requests import LLMRequestLog
from engram.postgres import EmbeddedPostgres
from engram.temporal_server import DYNAMIC_CONFIG, temporal_binary
from server.app import create_app
from server.services import Services
from worker.main import Workers, WorkerServices, build_worker
from worker.metrics import ActivityMetrics, MetricsInterceptor


@pytest.fixture(scope="session", autouse=True)
def payload_key() -> Iterator[None]:
    """Processes the tests start (workers, servers, `engram up`) inherit the session's key."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ENGRAM_PAYLOAD_KEY", TEST_PAYLOAD_KEY)
        yield


@pytest.fixture(scope="session")
def postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedPostgres]:
    root = tmp_path_factory.mktemp("pg")
    server = EmbeddedPostgres(root / "data", root / "postgres.log")
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    return load_embedder("minilm")


@pytest.fixture(scope="session")
async def temporal_env() -> AsyncIterator[WorkflowEnvironment]:
    extra: list[str] = []
    for value in DYNAMIC_CONFIG:
        extra += ["--dynamic-config-value", value]
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(temporal_binary()),
        data_converter=TEST_CONVERTER,
        dev_server_extra_args=extra,
        ui=False,
    )
    yield env
    await env.shutdown()


@pytest.fixture(scope="module")
async def database_url(
    request: pytest.FixtureRequest, postgres: EmbeddedPostgres, embedder: Embedder
) -> str:
    name = "t_" + re.sub(r"[^a-z0-9]+", "_", request.module.__name__.lower())[-50:]
    dsn = postgres.create_database(name)
    await migrate(dsn, embedder.dimension, embedder.space)
    return dsn


@pytest.fixture(scope="module")
async def pool(database_url: str) -> AsyncIterator[Pool]:
    pool = await create_pool(database_url, max_size=5)
    yield pool
    await pool.close()


@pytest.fixture
def task_queue() -> str:
    return f"tq-{uuid.uuid4()}"


@pytest.fixture
def bank_id() -> str:
    return f"bank-{uuid.uuid4().hex[:12]}"


@pytest.fixture(scope="session")
def cpu() -> Iterator[ThreadPoolExecutor]:
    executor = ThreadPoolExecutor(2, thread_name_prefix="test-cpu")
    yield executor
    executor.shutdown(wait=True)


@pytest.fixture
def llm_settings() -> LLMSettings:
    """No LLM by default; tests of the llm path override this with the scripted server."""
    return LLMSettings()


@pytest.fixture
def settings(
    tmp_path: Path, database_url: str, task_queue: str, llm_settings: LLMSettings
) -> Settings:
    return Settings(
        home=tmp_path, database_url=database_url, task_queue=task_queue, llm=llm_settings
    )


@pytest.fixture
async def worker(
    temporal_env: WorkflowEnvironment,
    settings: Settings,
    pool: Pool,
    embedder: Embedder,
    cpu: ThreadPoolExecutor,
) -> AsyncIterator[Workers]:
    """A real worker on this test's own task queue, with the production activities."""
    llm = LLMClient(settings.llm, LLMRequestLog(pool)) if settings.llm.configured else None
    services = WorkerServices(pool, embedder, cpu, llm)
    interceptor = MetricsInterceptor(ActivityMetrics(CollectorRegistry()))
    running = build_worker(temporal_env.client, settings.task_queue, services, interceptor)
    try:
        async with watched(running):
            yield running
    finally:
        if llm is not None:
            await llm.close()


@pytest.fixture
def app(
    temporal_env: WorkflowEnvironment,
    settings: Settings,
    pool: Pool,
    embedder: Embedder,
    cpu: ThreadPoolExecutor,
) -> Starlette:
    """The real app with its services already open (the lifespan is tested end to end)."""
    services = Services(settings, pool, temporal_env.client, embedder, cpu)
    application = create_app(_never)
    application.state.services = services
    return application


@pytest.fixture
async def api(app: Starlette, worker: Workers) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://engram.test") as client:
        yield client


@pytest.fixture
async def plain_api(app: Starlette) -> AsyncIterator[httpx.AsyncClient]:
    """The API without a worker: the test decides which workers run (durability tests)."""
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://engram.test") as client:
        yield client


def _never() -> AbstractAsyncContextManager[Services]:
    raise AssertionError("the lifespan does not run under ASGITransport")


def repo_root() -> Path:
    return Path(__file__).resolve().parent.parent
