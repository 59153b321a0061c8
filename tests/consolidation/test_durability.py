"""Consolidation survives failures: a batch failing right after its commit, and one failing
halfway through its transaction, both end with exactly the observations of an undisturbed
run, every fact consolidated once."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
from consolidation_support import configure, retain
from temporalio import activity
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from activities.consolidation import ConsolidationActivities
from activities.failures import FailureInterceptor
from engine.consolidation.payloads import BatchRequest, BatchResult, ConsolidationRequest
from engine.db import Pool
from engine.embedding import Embedder, FloatMatrix
from engine.settings import Settings
from worker.heartbeat import HeartbeatInterceptor
from worker.main import WORKFLOWS, WorkerServices, activities_of
from workflows.consolidation import ConsolidationWorkflow, consolidation_workflow_id

FACTS = [
    ("Alice", "I struggle with async Python."),
    ("Bob", "I live in Oslo."),
    ("Alice", "I prefer tea."),
    ("Bob", "I live in Oslo with my wife."),
    ("Alice", "I prefer tea in the morning."),
    ("Alice", "I wrote async database calls today."),
    ("Carla", "I play tennis every weekend."),
    ("Carla", "I play tennis on weekends."),
    ("Alice", "I prefer coffee now."),
    ("Bob", "I moved to Bergen."),
]


class FailsOnce:
    """An embedder whose first run fails: the batch dies inside its transaction."""

    def __init__(self, real: Embedder) -> None:
        self._real = real
        self.failed = False

    @property
    def name(self) -> str:
        return self._real.name

    @property
    def dimension(self) -> int:
        return self._real.dimension

    @property
    def space(self) -> str:
        return self._real.space

    def embed(self, texts: Sequence[str]) -> FloatMatrix:
        return self._real.embed(texts)

    def embed_tokens(self, texts: Sequence[str]) -> list[FloatMatrix]:
        return self._real.embed_tokens(texts)

    def known_tokens(self, text: str) -> list[bool]:
        return self._real.known_tokens(text)

    def embed_with_tokens(self, texts: Sequence[str]) -> tuple[FloatMatrix, list[FloatMatrix]]:
        if not self.failed:
            self.failed = True
            raise RuntimeError("worker lost in the middle of a batch")
        return self._real.embed_with_tokens(texts)


def failing_after_commit(
    env: WorkflowEnvironment, queue: str, pool: Pool, embedder: Embedder, cpu: ThreadPoolExecutor
) -> Worker:
    """The production worker, except that every batch fails once after committing."""
    real = ConsolidationActivities(pool, embedder, cpu, None)

    @activity.defn(name="consolidate_batch")
    async def consolidate_then_fail(request: BatchRequest) -> BatchResult:
        result = await real.consolidate_batch(request)
        if activity.info().attempt == 1:
            raise RuntimeError("worker lost right after the commit")
        return result

    services = WorkerServices(pool, embedder, cpu, None)
    activities = [a for a in activities_of(services) if a.__name__ != "consolidate_batch"]
    return Worker(
        env.client,
        task_queue=queue,
        workflows=list(WORKFLOWS),
        activities=[*activities, consolidate_then_fail],
        interceptors=[FailureInterceptor(), HeartbeatInterceptor()],
    )


def production(env: WorkflowEnvironment, queue: str, services: WorkerServices) -> Worker:
    return Worker(
        env.client,
        task_queue=queue,
        workflows=list(WORKFLOWS),
        activities=activities_of(services),
        interceptors=[FailureInterceptor(), HeartbeatInterceptor()],
    )


async def consolidate(env: WorkflowEnvironment, bank: str, queue: str) -> int:
    totals = await env.client.execute_workflow(
        ConsolidationWorkflow.run,
        ConsolidationRequest(bank, "api", batch_size=2),
        id=consolidation_workflow_id(bank),
        task_queue=queue,
    )
    return totals.facts


async def snapshot(pool: Pool, bank: str) -> list[tuple[Any, ...]]:
    """The observations by content: text, proof count, evidence and history by fact text."""
    rows = await pool.fetch(
        "SELECT m.text, m.proof_count,"
        " array(SELECT f.text || ':' || e.stance FROM observation_evidence e"
        "       JOIN memory_units f ON f.id = e.fact_id WHERE e.observation_id = m.id"
        "       ORDER BY 1) AS evidence,"
        " array(SELECT h.change || ':' || h.previous_text FROM observation_history h"
        "       WHERE h.observation_id = m.id ORDER BY h.id) AS history"
        " FROM memory_units m WHERE m.bank_id = $1 AND m.fact_type = 'observation'"
        " ORDER BY m.text",
        bank,
    )
    return [tuple(r.values()) for r in rows]


async def test_crashed_batches_resume_without_skipping_or_repeating_facts(
    api: httpx.AsyncClient,
    temporal_env: WorkflowEnvironment,
    settings: Settings,
    pool: Pool,
    embedder: Embedder,
    cpu: ThreadPoolExecutor,
    bank_id: str,
) -> None:
    banks = {"clean": bank_id, "after": f"{bank_id}-after", "mid": f"{bank_id}-mid"}
    items = [
        {
            "content": f"{speaker}: {text}",
            "timestamp": f"2024-01-{day:02d}T10:00:00Z",
            "document_id": f"fact-{day}",
        }
        for day, (speaker, text) in enumerate(FACTS, start=1)
    ]
    for bank in banks.values():
        await configure(api, bank, enable_observations=False)
        await retain(api, bank, items)  # stored in any order, consolidated in event order
        await configure(api, bank, enable_observations=True)

    assert await consolidate(temporal_env, banks["clean"], settings.task_queue) == len(FACTS)
    handle = temporal_env.client.get_workflow_handle_for(
        ConsolidationWorkflow.run, consolidation_workflow_id(banks["clean"])
    )
    progress = await handle.query(ConsolidationWorkflow.progress)
    assert (progress["facts"], progress["batches"], progress["backlog"]) == (len(FACTS), 5, 0)
    after_queue = f"{settings.task_queue}-after"
    async with failing_after_commit(temporal_env, after_queue, pool, embedder, cpu):
        assert await consolidate(temporal_env, banks["after"], after_queue) == len(FACTS)
    mid_queue = f"{settings.task_queue}-mid"
    flaky = FailsOnce(embedder)
    async with production(temporal_env, mid_queue, WorkerServices(pool, flaky, cpu, None)):
        assert await consolidate(temporal_env, banks["mid"], mid_queue) == len(FACTS)
    assert flaky.failed

    expected = await snapshot(pool, banks["clean"])
    assert len(expected) == 4  # Alice: async, tea → coffee; Bob: Oslo → Bergen; Carla: tennis
    for bank in (banks["after"], banks["mid"]):
        assert await snapshot(pool, bank) == expected
    for bank in banks.values():
        state = await pool.fetchrow(
            "SELECT facts_consolidated,"
            " (SELECT count(*) FROM consolidation_backlog WHERE bank_id = $1) AS pending"
            " FROM consolidation_state WHERE bank_id = $1",
            bank,
        )
        assert state is not None
        assert (state["facts_consolidated"], state["pending"]) == (len(FACTS), 0)
