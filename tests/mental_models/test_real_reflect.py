"""End to end through the real ReflectWorkflow (no LLM key: it answers with the evidence)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from prometheus_client import CollectorRegistry
from support.operations import finished_operation
from temporalio.testing import WorkflowEnvironment

from engine.db import Pool
from engine.embedding import Embedder
from engine.settings import Settings
from mental_models.mental_models_support import (
    create_model,
    get_model,
    history,
    retain,
)
from worker.main import Workers, WorkerServices, build_worker
from worker.metrics import ActivityMetrics, MetricsInterceptor


@pytest.fixture
async def worker(
    temporal_env: WorkflowEnvironment,
    settings: Settings,
    pool: Pool,
    embedder: Embedder,
    cpu: ThreadPoolExecutor,
) -> AsyncIterator[Workers]:
    """The production worker, real ReflectWorkflow included."""
    services = WorkerServices(pool, embedder, cpu, None)
    interceptor = MetricsInterceptor(ActivityMetrics(CollectorRegistry()))
    async with build_worker(temporal_env.client, settings.task_queue, services, interceptor) as w:
        yield w


async def test_a_refresh_through_the_real_reflect_stores_its_evidence(
    api: httpx.AsyncClient, bank_id: str
) -> None:
    await retain(api, bank_id, "stack", "The team uses Postgres for every service.")
    created = await create_model(
        api, bank_id, id="stack", name="Stack", source_query="Which database does the team use?"
    )
    operation = await finished_operation(api, bank_id, created["operation_id"])
    assert operation["status"] == "completed", operation
    model = await get_model(api, bank_id, "stack")
    assert model["reflect_response"]["llm_configured"] is False
    assert "Postgres" in model["content"]
    facts = await api.get(
        f"/v1/default/banks/{bank_id}/memories/list", params={"document_id": "stack"}
    )
    assert {m["id"] for m in facts.json()["items"]} & {e["id"] for e in model["based_on"]}
    assert [v["version"] for v in await history(api, bank_id, "stack")] == [1]


async def test_a_dry_run_reports_what_its_retrieval_returned(
    api: httpx.AsyncClient, bank_id: str
) -> None:
    await retain(api, bank_id, "trip", "Ines flew to Lisbon for the conference in May 2024.")
    created = await create_model(
        api, bank_id, id="travel", name="Travel", source_query="Where did Ines travel?"
    )
    await finished_operation(api, bank_id, created["operation_id"])
    url = f"/v1/default/banks/{bank_id}/mental-models/travel/dry-run-refresh"
    preview = await api.post(url)
    assert preview.status_code == 200, preview.text
    body = preview.json()
    facts = (await api.get(f"/v1/default/banks/{bank_id}/memories/list")).json()["items"]
    [call] = body["trace"]["tool_calls"]  # no LLM here: the one search reflect makes
    returned = {r["id"] for r in call["output"]["results"]}
    assert {f["id"] for f in facts if "Lisbon" in f["text"]} <= returned
    assert call["result_count"] == len(returned) and call["input"]["query"]
    assert sum(body["facts"]["retrieved"].values()) == len(returned)
    assert body["facts"]["retrieved"].keys() >= body["facts"]["used"].keys()
