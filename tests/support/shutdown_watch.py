"""Runs an in-process worker for a test and says what it waits on if its shutdown is slow.

A worker's shutdown waits for its activities to finish and for every workflow run it caches
to be evicted (sdk-core's `shutdown_done`: no run with a task, an activation or an eviction
outstanding); the Python side retries an eviction it cannot complete every 2 s for ever (a
workflow task that outlived the 2 s deadlock detector, or code that swallows the eviction's
cancel). A rare teardown under load once waited past the test timeout with nothing to show
for it. If shutdown takes longer than SLOW_SHUTDOWN_S, every asyncio task's stack and what each
worker still holds (cached runs, runs whose eviction failed, running activities) go to stderr
(pytest prints it with the failure), so the next occurrence names what it waited on.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from temporalio.worker import Worker

from worker.main import Workers

SLOW_SHUTDOWN_S = 60.0


def held(worker: Worker) -> str:
    """What the SDK's Python side of `worker` still holds. Reads private attributes, for a
    diagnostic only: a missing one reads as empty."""
    workflows: Any = getattr(worker, "_workflow_worker", None)
    activities: Any = getattr(worker, "_activity_worker", None)
    runs: dict[str, Any] = getattr(workflows, "_running_workflows", None) or {}
    stuck = [r for r, run in runs.items() if getattr(run, "deadlocked_activation_task", None)]
    running: dict[bytes, Any] = getattr(activities, "_running_activities", None) or {}
    cached = ", ".join(f"{getattr(run, 'workflow_id', '?')}/{r}" for r, run in runs.items())
    return (
        f"{len(runs)} cached run(s) [{cached}]; "
        f"{getattr(workflows, '_could_not_evict_count', 0)} eviction(s) failing; "
        f"{len(stuck)} run(s) past the deadlock detector {stuck}; "
        f"{len(running)} activity task(s) running"
    )


def _dump(worker: Workers) -> None:
    print(f"\nworker shutdown still waiting after {SLOW_SHUTDOWN_S:.0f} s", file=sys.stderr)
    for name, each in (("main", worker.main), ("embed", worker.embed)):
        print(f"{name} worker ({each.task_queue}): {held(each)}", file=sys.stderr)
    print("tasks:", file=sys.stderr)
    for task in asyncio.all_tasks():
        print(f"--- {task!r}", file=sys.stderr)
        task.print_stack(limit=25, file=sys.stderr)


@asynccontextmanager
async def watched(worker: Workers) -> AsyncIterator[Workers]:
    watchdog: asyncio.TimerHandle | None = None
    try:
        async with worker:
            try:
                yield worker
            finally:
                loop = asyncio.get_running_loop()
                watchdog = loop.call_later(SLOW_SHUTDOWN_S, _dump, worker)
    finally:
        if watchdog is not None:
            watchdog.cancel()
