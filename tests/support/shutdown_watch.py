"""Runs an in-process worker for a test and says what it waits on if its shutdown is slow.

A worker's shutdown waits for its activities to finish and its workflows to be evicted; a
rare teardown under load once waited past the test timeout with nothing to show for it. If
shutdown takes longer than SLOW_SHUTDOWN_S, every asyncio task's stack goes to stderr (pytest
prints it with the failure), so the next occurrence names what it waited on.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from worker.main import Workers

SLOW_SHUTDOWN_S = 60.0


def _dump_tasks() -> None:
    print(f"\nworker shutdown still waiting after {SLOW_SHUTDOWN_S:.0f} s; tasks:", file=sys.stderr)
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
                watchdog = loop.call_later(SLOW_SHUTDOWN_S, _dump_tasks)
    finally:
        if watchdog is not None:
            watchdog.cancel()
