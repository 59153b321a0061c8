"""Chinese editorial notes retained and recalled through the API with no LLM (issue 13's
"done when"): the sandbox rule first, relative dates stored absolutely, 小林 an entity, and
"去年春天" in a query selecting March–May of last year."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry
from temporalio.testing import WorkflowEnvironment

from engine.db import Pool
from engine.embedding import Embedder
from recall.recall_support import BASE, recall_app
from server.services import Services
from worker.main import WorkerServices, build_worker
from worker.metrics import ActivityMetrics, MetricsInterceptor

WRITTEN = "2026-10-02T10:00:00Z"  # a Friday
ASKED = "2026-12-01T09:00:00+00:00"
NOTES = [
    {
        "content": "小林负责开源栏目，写稿前先在沙箱里跑通，不喜欢只翻译 README，"
        "截图统一用 1440×900；团队主要用 Postgres。",
        "document_id": "rules",
    },
    {"content": "上周那篇稿子被主编退回了，因为截图尺寸不对。", "document_id": "draft"},
    {"content": "去年春天小林去杭州参加了数据库大会。", "document_id": "spring"},
    {"content": "小李负责视频栏目，喜欢用 Figma 画分镜。", "document_id": "li"},
    {"content": "团队每周五下午在三楼会议室开例会。", "document_id": "meeting"},
    {"content": "主编喜欢简洁的标题，不超过二十个字。", "document_id": "titles"},
]


@pytest.fixture(scope="module")
async def editorial(
    tmp_path_factory: pytest.TempPathFactory,
    temporal_env: WorkflowEnvironment,
    recall_pool: Pool,
    embedder: Embedder,
    cpu: ThreadPoolExecutor,
) -> str:
    """A bank holding the notes, retained through API → Temporal worker → PostgreSQL."""
    application = recall_app(
        tmp_path_factory.mktemp("zh"), recall_pool, temporal_env, embedder, cpu
    )
    services: Services = application.state.services
    running = build_worker(
        temporal_env.client,
        services.settings.task_queue,
        WorkerServices(recall_pool, embedder, cpu, None),
        MetricsInterceptor(ActivityMetrics(CollectorRegistry())),
    )
    bank = f"recall-zh-{uuid.uuid4().hex[:8]}"
    items = [{**note, "timestamp": WRITTEN} for note in NOTES]
    transport = httpx.ASGITransport(app=application)
    async with running, httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        response = await client.post(f"{BASE}/{bank}/memories", json={"items": items})
        assert response.status_code == 200, response.text
    return bank


@pytest.fixture
async def client(
    tmp_path: Path,
    temporal_env: WorkflowEnvironment,
    recall_pool: Pool,
    embedder: Embedder,
    cpu: ThreadPoolExecutor,
) -> Any:
    application = recall_app(tmp_path, recall_pool, temporal_env, embedder, cpu)
    transport = httpx.ASGITransport(app=application)
    async with httpx.AsyncClient(transport=transport, base_url="http://engram.test") as c:
        yield c


async def recall(client: httpx.AsyncClient, bank: str, query: str) -> dict[str, Any]:
    response = await client.post(
        f"{BASE}/{bank}/memories/recall",
        json={"query": query, "query_timestamp": ASKED, "trace": True},
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def test_writing_for_xiaolin_puts_the_sandbox_rule_first(
    client: httpx.AsyncClient, editorial: str
) -> None:
    body = await recall(client, editorial, "给小林写稿要注意什么")
    top = body["results"][0]
    assert "沙箱" in top["text"]
    assert "小林" in top["entities"]
    assert not top["text"].endswith("。.")
    assert body["trace"]["scoring"]["asks_time"] is False


async def test_last_week_is_stored_as_the_calendar_week_before(
    client: httpx.AsyncClient, editorial: str
) -> None:
    body = await recall(client, editorial, "哪篇稿子被退回了")
    draft = next(r for r in body["results"] if "退回" in r["text"])
    assert "上周（2026年9月21日至27日）" in draft["text"]
    assert draft["occurred_start"].startswith("2026-09-21")
    assert draft["occurred_end"].startswith("2026-09-28")


async def test_last_spring_in_a_query_selects_march_to_may_of_last_year(
    client: httpx.AsyncClient, editorial: str
) -> None:
    body = await recall(client, editorial, "去年春天小林去了哪里")
    window = body["trace"]["window"]
    assert window["start"].startswith("2025-03-01") and window["end"].startswith("2025-06-01")
    assert "杭州" in body["results"][0]["text"]


async def test_a_question_asking_when_is_answered_by_the_dated_fact(
    client: httpx.AsyncClient, editorial: str
) -> None:
    body = await recall(client, editorial, "小林什么时候去的杭州？")
    assert body["trace"]["scoring"]["asks_time"] is True
    assert "杭州" in body["results"][0]["text"]
