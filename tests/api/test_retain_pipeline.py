"""The batched document pipeline through the API: many small documents share a few batch
workflows, large items never travel in workflow payloads, and a failed run leaves nothing
that breaks the next retain into the bank."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
from support.operations import finished_operation
from support.workers import production_worker
from temporalio.api.enums.v1 import EventType
from temporalio.testing import WorkflowEnvironment

from engine.db import Pool
from engine.embedding import Embedder
from engine.limits import MAX_CONTEXT_CHARS
from engine.retain.payloads import PlannedDocument
from engine.settings import Settings
from server.retain import retain_workflow_id
from workflows.pipeline import extraction_slices
from workflows.policies import embed_queue

BASE = "/v1/default/banks"


async def retain(api: httpx.AsyncClient, bank: str, body: dict[str, Any]) -> dict[str, Any]:
    response = await api.post(f"{BASE}/{bank}/memories", json=body)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


async def staged_rows(pool: Pool, operation_id: str) -> int:
    async with pool.acquire() as conn:
        total: int = await conn.fetchval(
            "SELECT (SELECT count(*) FROM retain_documents WHERE operation_id = $1)"
            " + (SELECT count(*) FROM document_plans WHERE operation_id = $1)"
            " + (SELECT count(*) FROM staged_facts WHERE operation_id = $1)"
            " + (SELECT count(*) FROM document_claims WHERE operation_id = $1)",
            operation_id,
        )
    return total


async def test_one_document_per_message_runs_in_a_few_batches_with_exact_counts(
    api: httpx.AsyncClient,
    temporal_env: WorkflowEnvironment,
    settings: Settings,
    pool: Pool,
    bank_id: str,
) -> None:
    """The reference client's pattern: 200 messages, each its own document."""
    op = f"many-{bank_id}"
    items = [
        {
            "content": f"Ines met Tomas in Porto on day {i} and they talked about boat {i}.",
            "document_id": f"msg-{i}",
            "timestamp": "2024-05-01T10:00:00Z",
        }
        for i in range(200)
    ]
    body = await retain(api, bank_id, {"items": items, "operation_id": op})
    assert body["documents"] == 200
    assert body["document_ids"] == [f"msg-{i}" for i in range(200)]
    async with pool.acquire() as conn:
        facts = await conn.fetchval("SELECT count(*) FROM memory_units WHERE bank_id = $1", bank_id)
        documents = await conn.fetchval(
            "SELECT count(*) FROM documents WHERE bank_id = $1", bank_id
        )
    assert body["facts_added"] == facts >= 200
    assert documents == 200
    history = temporal_env.client.get_workflow_handle(retain_workflow_id(bank_id, op))
    batches = [
        e
        async for e in history.fetch_history_events()
        if e.event_type == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED
        and e.start_child_workflow_execution_initiated_event_attributes.workflow_type.name
        == "DocumentBatchWorkflow"
    ]
    # 200 documents in one batch (policies.BATCH_LEAST), not 200 child workflows.
    assert len(batches) == 1
    # Each batch embeds on the embedding step's own queue (worker/main.py `Workers`).
    child = batches[0].start_child_workflow_execution_initiated_event_attributes.workflow_id
    queues = {
        e.activity_task_scheduled_event_attributes.task_queue.name
        async for e in temporal_env.client.get_workflow_handle(child).fetch_history_events()
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == "embed_facts"
    }
    assert queues == {embed_queue(settings.task_queue)}
    assert await staged_rows(pool, op) == 0
    # Sent again, nothing changes (upsert by document id).
    again = await retain(api, bank_id, {"items": items})
    assert again["facts_added"] == 0 and again["facts_removed"] == 0


async def test_large_items_are_staged_not_carried_in_workflow_payloads(
    api: httpx.AsyncClient, pool: Pool, bank_id: str
) -> None:
    """One item of 960,000 characters and one with the largest context the edge admits:
    payloads carry ids only, so neither meets Temporal's payload limit (a 2,000,000-character
    context is refused at the edge: tests/api/test_hostile_input.py)."""
    # Large chunks and no extraction: the test is about carrying the text, not embedding it.
    config = {"extraction_mode": "none", "chunk_size": 100_000}
    put = await api.put(f"{BASE}/{bank_id}", json=config)
    assert put.status_code == 200, put.text
    paragraph = "Ines rowed the boat across the river at dawn while Tomas kept time. " * 15
    big = "\n\n".join(f"{i}: {paragraph}" for i in range(960_000 // (len(paragraph) + 10)))
    big = big + "x" * (960_000 - len(big))
    items = [
        {"content": big, "document_id": "big"},
        {
            "content": "Tomas fixed the oar.",
            "context": "c" * MAX_CONTEXT_CHARS,
            "document_id": "ctx",
        },
    ]
    body = await retain(api, bank_id, {"items": items})
    assert body["documents"] == 2
    async with pool.acquire() as conn:
        chunks = await conn.fetchval(
            "SELECT sum(length(content)) FROM chunks WHERE bank_id = $1 AND document_id = 'big'",
            bank_id,
        )
        context = await conn.fetchval(
            "SELECT length(context) FROM memory_units WHERE bank_id = $1 AND document_id = 'ctx'",
            bank_id,
        )
    assert chunks >= 900_000
    assert context == MAX_CONTEXT_CHARS


async def test_an_out_of_range_timestamp_is_refused_and_the_bank_keeps_working(
    api: httpx.AsyncClient, bank_id: str
) -> None:
    for stamp in ("9999-12-31T23:59:59-12:00", "0001-01-01T00:00:00+14:00"):
        response = await api.post(
            f"{BASE}/{bank_id}/memories",
            json={"items": [{"content": "Ines sold the boat.", "timestamp": stamp}]},
        )
        assert response.status_code == 422, response.text
        assert response.json()["field"] == "items.0.timestamp"
    body = await retain(api, bank_id, {"items": [{"content": "Tomas bought a new boat."}]})
    assert body["facts_added"] > 0


async def test_a_relative_chinese_date_at_the_first_admitted_day_is_no_date(
    api: httpx.AsyncClient, bank_id: str
) -> None:
    # "去年" (last year) written on 3 Jan of year 1 names year 0: the Chinese rules raised
    # instead of finding no date, in retain's extraction and in recall's query window alike.
    stamp = "0001-01-03T00:00:00+00:00"
    body = await retain(
        api,
        bank_id,
        {"items": [{"content": "去年我把船卖了。上周我买了新船。", "timestamp": stamp}]},
    )
    assert body["facts_added"] > 0
    response = await api.post(
        f"{BASE}/{bank_id}/memories/recall",
        json={"query": "去年卖了什么？", "query_timestamp": stamp},
    )
    assert response.status_code == 200, response.text
    assert response.json()["results"]


async def test_staged_facts_of_an_ended_operation_never_reach_a_later_retain(
    api: httpx.AsyncClient, pool: Pool, embedder: Embedder, bank_id: str
) -> None:
    """Row 8's root cause: a failed run's staged fact, undecodable (year 10000 in UTC), was
    read by the link step of every later retain. An ended operation's staging is ignored, and
    removed by the sweep once old."""
    await retain(api, bank_id, {"items": [{"content": "Ines owns a red boat."}]})
    fact = {
        "text": "Ines sold the boat.",
        "_chunk": {"mentioned_at": "9999-12-31T23:59:59-12:00", "index": 0},
    }
    async with pool.acquire() as conn:
        await conn.execute(
            "INSERT INTO operations (operation_id, bank_id, kind, workflow_id, request_hash,"
            " status) VALUES ('poison-' || $1, $1, 'retain', 'gone', 'h', 'failed')",
            bank_id,
        )
        await conn.execute(
            "INSERT INTO staged_facts (fact_id, bank_id, operation_id, document_id, chunk_id,"
            " fact, embedding, entity_ids, created_at)"
            " VALUES (gen_random_uuid(), $1, 'poison-' || $1, 'd', 'c', $2,"
            " array_fill(0.1::real, ARRAY[$3::int])::vector, '{}', now() - interval '2 hours')",
            bank_id,
            fact,
            embedder.dimension,
        )
    body = await retain(api, bank_id, {"items": [{"content": "Tomas bought a new boat."}]})
    assert body["facts_added"] > 0
    async with pool.acquire() as conn:  # the retain's end swept the old orphan away
        left = await conn.fetchval("SELECT count(*) FROM staged_facts WHERE bank_id = $1", bank_id)
    assert left == 0


async def test_ten_thousand_items_are_staged_and_a_cancelled_retain_keeps_only_its_input(
    plain_api: httpx.AsyncClient,
    temporal_env: WorkflowEnvironment,
    settings: Settings,
    pool: Pool,
    embedder: Embedder,
    cpu: ThreadPoolExecutor,
    bank_id: str,
) -> None:
    """10,000 items: the workflow's input is the options and two counts, not the items; the
    operation cancelled, its staging is discarded but for its input (kept for a retry)."""
    op = f"big-{bank_id}"
    items = [{"content": f"Note {i}: Ines checked the mooring."} for i in range(10_000)]
    body = {"items": items, "async": True, "operation_id": op}
    response = await plain_api.post(f"{BASE}/{bank_id}/memories", json=body)
    assert response.status_code == 200, response.text
    assert await staged_rows(pool, op) == 10_000
    handle = temporal_env.client.get_workflow_handle(retain_workflow_id(bank_id, op))
    async for event in handle.fetch_history_events():
        started = event.workflow_execution_started_event_attributes
        assert sum(len(p.data) for p in started.input.payloads) < 2_000
        break
    assert (await plain_api.delete(f"{BASE}/{bank_id}/operations/{op}")).status_code == 200
    async with production_worker(temporal_env, settings, pool, embedder, cpu):
        final = await finished_operation(plain_api, bank_id, op)
    assert final["status"] == "cancelled"
    assert await staged_rows(pool, op) == 10_000
    async with pool.acquire() as conn:
        kept = await conn.fetchval(
            "SELECT count(*) FROM retain_documents WHERE operation_id = $1", op
        )
    assert kept == 10_000


def _calls(
    planned: list[PlannedDocument], size: int, chars: int | None
) -> list[list[tuple[int, int, int]]]:
    return [
        [(s.seq, s.start, s.stop) for s in call] for call in extraction_slices(planned, size, chars)
    ]


def test_extraction_calls_are_cut_by_chunks_and_by_characters() -> None:
    """A call's fact ids come back in one Temporal payload (2 MB at most): so a call holds at
    most `size` chunks and about `chars` characters, whatever the mix of documents; every
    chunk is in exactly one call, in order, and a call never is empty."""
    turns = [PlannedDocument(seq, 1, 130) for seq in range(600)]  # chat turns: by count
    calls = _calls(turns, 512, 100_000)
    assert [len(call) for call in calls] == [512, 88]
    book = [PlannedDocument(0, 333, 333 * 3000)]  # one long text: by characters
    calls = _calls(book, 512, 100_000)
    assert [sum(stop - start for _, start, stop in call) for call in calls] == [33] * 10 + [3]
    huge = [PlannedDocument(0, 2, 2 * 250_000), PlannedDocument(1, 1, 10)]  # over alone
    assert _calls(huge, 512, 100_000) == [[(0, 0, 1)], [(0, 1, 2)], [(1, 0, 1)]]
    old = [PlannedDocument(0, 333)]  # planned before characters were counted
    assert _calls(old, 512, 100_000) == [[(0, 0, 333)]] == _calls(old, 512, None)
    mixed = [
        PlannedDocument(0, 3, 3 * 40_000),
        PlannedDocument(1, 1, 50),
        PlannedDocument(2, 0, 0),
        PlannedDocument(3, 5, 5 * 30_000),
    ]
    calls = _calls(mixed, 4, 100_000)
    assert calls == [
        [(0, 0, 2)],
        [(0, 2, 3), (1, 0, 1), (3, 0, 1)],
        [(3, 1, 4)],
        [(3, 4, 5)],
    ]
