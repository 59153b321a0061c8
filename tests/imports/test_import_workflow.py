"""ImportWorkflow on its own: long imports continue as new with their totals, and a document
that fails is reported by name while the others are imported."""

from __future__ import annotations

import json

from temporalio.api.enums.v1 import EventType
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from engine.db import Pool
from engine.imports.model import ImportOptions, SourceFile
from engine.imports.parse import parse_import
from engine.imports.payloads import ImportRequest, ImportResult
from engine.imports.staging import stage_import
from engine.settings import Settings
from engine.store.banks import ensure_bank
from engine.store.operations import get_operation, register_operation
from workflows.imports import ImportWorkflow, import_workflow_id


def conversations(count: int) -> str:
    return "\n".join(
        json.dumps(
            {
                "conversation_id": f"conv-{c}",
                "speaker": "Ana",
                "content": f"I planted {c + 2} olive trees in Évora with Rui last spring.",
                "timestamp": "2024-06-01T10:00:00Z",
            }
        )
        for c in range(count)
    )


async def stage(pool: Pool, bank_id: str, operation_id: str, count: int) -> ImportRequest:
    parsed = parse_import([SourceFile("", conversations(count))], ImportOptions())
    async with pool.acquire() as conn:
        await ensure_bank(conn, bank_id)
        await register_operation(
            conn, operation_id, bank_id, "import", import_workflow_id(bank_id, operation_id), "h"
        )
        await stage_import(conn, operation_id, bank_id, parsed)
    return ImportRequest(bank_id, operation_id, len(parsed.documents), parsed.records)


async def test_a_long_import_continues_as_new_and_keeps_its_totals(
    temporal_env: WorkflowEnvironment, worker: Worker, settings: Settings, pool: Pool, bank_id: str
) -> None:
    operation_id = f"can-{bank_id}"
    request = await stage(pool, bank_id, operation_id, 5)
    handle = await temporal_env.client.start_workflow(
        ImportWorkflow.run,
        ImportRequest(
            request.bank_id,
            request.operation_id,
            request.documents_total,
            request.items_total,
            documents_per_run=2,
        ),
        id=import_workflow_id(bank_id, operation_id),
        task_queue=settings.task_queue,
    )
    result: ImportResult = await handle.result()
    assert result.totals.documents == 5 and result.totals.items == 5
    first_run = temporal_env.client.get_workflow_handle(
        handle.id, run_id=handle.first_execution_run_id
    )
    events = [e.event_type async for e in first_run.fetch_history_events()]
    assert events[-1] == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
    async with pool.acquire() as conn:
        facts = await conn.fetchval("SELECT count(*) FROM memory_units WHERE bank_id = $1", bank_id)
        staged = await conn.fetchval(
            "SELECT count(*) FROM import_documents WHERE operation_id = $1", operation_id
        )
        operation = await get_operation(conn, bank_id, operation_id)
    assert result.totals.facts_added == facts > 0
    assert staged == 0
    assert operation.status == "completed"
    assert operation.progress["documents_done"] == 5
    assert operation.progress["items_done"] == 5


async def test_a_failing_document_is_named_and_the_others_are_imported(
    temporal_env: WorkflowEnvironment, worker: Worker, settings: Settings, pool: Pool, bank_id: str
) -> None:
    operation_id = f"fail-{bank_id}"
    request = await stage(pool, bank_id, operation_id, 3)
    async with pool.acquire() as conn:
        await conn.execute(
            "UPDATE import_documents SET items = '[{\"nope\": 1}]'::jsonb"
            " WHERE operation_id = $1 AND seq = 1",
            operation_id,
        )
    result: ImportResult = await temporal_env.client.execute_workflow(
        ImportWorkflow.run,
        request,
        id=import_workflow_id(bank_id, operation_id),
        task_queue=settings.task_queue,
    )
    assert result.totals.documents == 2 and result.totals.documents_failed == 1
    [failure] = result.totals.failures
    assert failure.startswith("conv-1: ") and "staged document conv-1 is corrupt" in failure
    async with pool.acquire() as conn:
        operation = await get_operation(conn, bank_id, operation_id)
        documents = await conn.fetch(
            "SELECT document_id FROM documents WHERE bank_id = $1 ORDER BY 1", bank_id
        )
    assert [d["document_id"] for d in documents] == ["conv-0", "conv-2"]
    assert operation.status == "failed"
    assert operation.error is not None and operation.error.startswith("1 of 3 documents failed")
    assert operation.result is not None and operation.result["documents_failed"] == 1
