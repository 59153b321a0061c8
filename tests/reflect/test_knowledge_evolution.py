"""Done-when of issue 6: a bank built from the "knowledge evolution" story (week 1: struggles
with async Python; week 3: writes async database calls) ends with one updated observation,
and reflect, driven by the scripted model through the API, cites that observation."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any

import httpx
from prometheus_client import CollectorRegistry
from reflect_support import BASE, reflect, retain, said
from support.fake_openai import FakeOpenAI, Spec, ToolCall, ToolCalls
from support.operations import consolidated
from temporalio.testing import WorkflowEnvironment

from engine.db import Pool
from engine.embedding import Embedder
from engine.llm import LLMClient
from engine.settings import LLMSettings, Settings
from server.app import create_app
from server.services import Services
from worker.main import WorkerServices, build_worker
from worker.metrics import ActivityMetrics, MetricsInterceptor

QUESTION = "Is Alice comfortable with async Python?"


@asynccontextmanager
async def scripted_api(
    env: WorkflowEnvironment,
    settings: Settings,
    pool: Pool,
    embedder: Embedder,
    cpu: ThreadPoolExecutor,
    fake: FakeOpenAI,
) -> AsyncIterator[httpx.AsyncClient]:
    """The same database served by an app and a worker that talk to the scripted model."""
    llm_settings = LLMSettings(api_key="test-key", base_url=fake.base_url, model="fake")
    scripted = Settings(
        home=settings.home,
        database_url=settings.database_url,
        task_queue=f"tq-{uuid.uuid4()}",
        llm=llm_settings,
    )
    llm = LLMClient(llm_settings)
    services = WorkerServices(pool, embedder, cpu, llm)
    interceptor = MetricsInterceptor(ActivityMetrics(CollectorRegistry()))
    app = create_app(_never)
    app.state.services = Services(scripted, pool, env.client, embedder, cpu)
    try:
        async with build_worker(env.client, scripted.task_queue, services, interceptor):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
                yield client
    finally:
        await llm.close()


def _never() -> Any:
    raise AssertionError("the lifespan does not run under ASGITransport")


def agent(request: dict[str, Any]) -> Spec:
    """A model that searches observations once, then cites every observation it was shown."""
    results = [m["content"] for m in request["messages"] if m["role"] == "tool"]
    if not results:
        return ToolCalls((ToolCall("search_observations", json.dumps({"query": QUESTION})),))
    shown = json.loads(results[-1])["results"]
    ids = [r["id"] for r in shown if r["type"] == "observation"]
    answer = "Yes: " + " ".join(r["text"] for r in shown)
    return ToolCalls((ToolCall("done", json.dumps({"answer": answer, "ids": ids})),))


async def test_reflect_cites_the_single_updated_observation(
    api: httpx.AsyncClient,
    bank_id: str,
    temporal_env: WorkflowEnvironment,
    settings: Settings,
    pool: Pool,
    embedder: Embedder,
    cpu: ThreadPoolExecutor,
) -> None:
    # The story, consolidated by the local path (no key on this worker).
    [week1] = await retain(
        api, bank_id, [said("Alice", "I struggle with async Python.", "2024-01-02", "week-1")]
    )
    await consolidated(api, bank_id)
    [week3] = await retain(
        api, bank_id, [said("Alice", "I wrote async database calls today.", "2024-01-16", "week-3")]
    )
    await consolidated(api, bank_id)
    listed = await api.get(f"{BASE}/{bank_id}/memories/list", params={"type": "observation"})
    [observation] = listed.json()["items"]
    assert "growing comfortable with async Python" in observation["text"]

    # Without a model, the evidence leads with that observation.
    plain = await reflect(api, bank_id, query=QUESTION)
    memories = plain["based_on"]["memories"]
    assert memories[0]["id"] == observation["id"] and memories[0]["type"] == "observation"
    assert [m["id"] for m in memories if m["type"] == "observation"] == [observation["id"]]
    assert {week1, week3} >= {m["id"] for m in memories if m["type"] != "observation"}

    # With the scripted model, through the API.
    with FakeOpenAI(responder=agent) as fake:
        async with scripted_api(temporal_env, settings, pool, embedder, cpu, fake) as scripted:
            answer = await reflect(scripted, bank_id, query=QUESTION, include={"facts": {}})
        assert len(fake.requests) == 2
        assert observation["text"] in fake.requests[1]["messages"][-1]["content"]
    [cited] = answer["based_on"]["memories"]
    assert cited["id"] == observation["id"] and cited["type"] == "observation"
    assert cited["text"] == observation["text"]
    assert answer["text"] == f"Yes: {observation['text']}"
