"""Heartbeats for every activity that asks for them.

Activities declare `heartbeat_timeout` in their policy; this interceptor heartbeats on their
behalf while they run, so a worker that dies (kill -9, lost machine) is noticed within that
timeout and the attempt is retried elsewhere, instead of after the full start-to-close
timeout. Activities that report real progress can still heartbeat themselves.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from temporalio import activity
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor

# Heartbeat this often relative to the timeout: several beats fit in one timeout window.
BEATS_PER_TIMEOUT = 4


class _HeartbeatInbound(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        timeout = activity.info().heartbeat_timeout
        if not timeout:
            return await super().execute_activity(input)
        beat = asyncio.create_task(_beat(timeout.total_seconds() / BEATS_PER_TIMEOUT))
        try:
            return await super().execute_activity(input)
        finally:
            beat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beat


async def _beat(interval: float) -> None:
    while True:
        activity.heartbeat()
        await asyncio.sleep(interval)


class HeartbeatInterceptor(Interceptor):
    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _HeartbeatInbound(next)
