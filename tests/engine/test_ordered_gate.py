"""The embedding gate serves waiters lowest key first and never loses a slot."""

from __future__ import annotations

import asyncio
import contextlib

from engine.retain.gate import OrderedGate


async def test_waiters_are_served_lowest_key_first() -> None:
    gate = OrderedGate(1)
    served: list[int] = []
    release = asyncio.Event()

    async def first() -> None:
        async with gate.hold(0):
            await release.wait()

    async def waiter(key: int) -> None:
        async with gate.hold(key):
            served.append(key)

    holder = asyncio.create_task(first())
    await asyncio.sleep(0)
    waiters = [asyncio.create_task(waiter(k)) for k in (5, 1, 3, 1)]
    await asyncio.sleep(0)
    assert served == []
    release.set()
    await asyncio.gather(holder, *waiters)
    assert served == [1, 1, 3, 5]


async def test_a_cancelled_waiter_does_not_keep_a_slot() -> None:
    gate = OrderedGate(1)
    forever = asyncio.Event()

    async def hold_forever() -> None:
        async with gate.hold(0):
            await forever.wait()

    async with gate.hold(0):
        waiting = asyncio.create_task(hold_forever())
        handed = asyncio.create_task(hold_forever())
        await asyncio.sleep(0)
        waiting.cancel()  # cancelled while waiting
    # The slot was handed to `handed`, which is cancelled before it runs.
    handed.cancel()
    for task in (waiting, handed):
        with contextlib.suppress(asyncio.CancelledError):
            await task
    async with asyncio.timeout(5), gate.hold(1):
        pass
