"""Waiting for what the code under test does in the background (a workflow, a schedule, a
process starting): look again until a condition holds, up to a deadline.

A bound counted in tries (`for _ in range(600)`) says nothing about time: under load each try
takes longer, and a bound that was ample on a quiet host is not a statement about a slow one.
One deadline serves the whole suite, WAIT_S, generous for this 2-core host at load 20-30 and
still below the per-test timeout (pyproject.toml), so a wait that runs out fails with its own
message and the last value it saw instead of a bare timeout.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

# Seconds; the per-test timeout is 180 s.
WAIT_S = 120.0
POLL_S = 0.1


async def until(
    probe: Callable[[], Awaitable[T]],
    done: Callable[[T], object],
    what: str,
    *,
    timeout: float = WAIT_S,
    every: float = POLL_S,
) -> T:
    """`probe()`'s first value that is `done`; `what` names the awaited event in the failure."""
    deadline = time.monotonic() + timeout
    while True:
        value = await probe()
        if done(value):
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what}: not within {timeout:.0f} s; last saw {value!r}")
        await asyncio.sleep(every)


def until_sync(
    probe: Callable[[], T],
    done: Callable[[T], object],
    what: str,
    *,
    timeout: float = WAIT_S,
    every: float = POLL_S,
) -> T:
    """`until` for tests that drive processes from synchronous code."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if done(value):
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what}: not within {timeout:.0f} s; last saw {value!r}")
        time.sleep(every)
