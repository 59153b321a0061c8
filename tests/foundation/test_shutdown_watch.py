"""The shutdown watchdog's account of what a worker still holds reads the SDK's private
state: this keeps it honest across SDK upgrades (a renamed attribute would read as empty)."""

from __future__ import annotations

import uuid

from support.shutdown_watch import held
from support.waiting import until
from temporalio.testing import WorkflowEnvironment

from engine.consolidation.payloads import ConsolidationRequest
from worker.main import Workers
from workflows.consolidation import ConsolidationWorkflow


async def test_a_cached_workflow_run_is_named(
    temporal_env: WorkflowEnvironment, worker: Workers, task_queue: str
) -> None:
    assert held(worker.main).startswith("0 cached run(s) [];")
    workflow_id = f"watched-{uuid.uuid4()}"
    handle = await temporal_env.client.start_workflow(
        ConsolidationWorkflow.run,
        ConsolidationRequest("watched-bank", settle_seconds=3600),  # sleeps before any work
        id=workflow_id,
        task_queue=task_queue,
    )
    try:
        state = await until(
            lambda: _held(worker), lambda state: state.startswith("1 cached"), "a cached run"
        )
        assert f"[{workflow_id}/{handle.result_run_id}]" in state, state
        assert "0 eviction(s) failing; 0 run(s) past the deadlock detector" in state, state
        assert state.endswith("0 activity task(s) running"), state
    finally:
        await handle.terminate()


async def _held(worker: Workers) -> str:
    return held(worker.main)
