"""An ordered gate for the embedding step: at most `slots` model runs at once, waiters served
lowest key first (then in arrival order).

Why: a bulk import runs several documents at once, and with a first-come CPU pool their
embedding batches interleave, so every document finishes embedding at about the same time
and then links and upserts while the CPU pool idles (LoCoMo: no document done for the first
three quarters of the import, then all of them). Served in document order, the first document
embeds alone, then links and upserts while the next one embeds: the steps overlap instead of
taking turns. Retains use key 0 and imports their document's position + 1, so a retain made
during an import does not wait behind it.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class OrderedGate:
    def __init__(self, slots: int) -> None:
        self._free = slots
        self._waiting: list[tuple[int, int, asyncio.Future[None]]] = []
        self._arrivals = itertools.count()

    @asynccontextmanager
    async def hold(self, key: int) -> AsyncIterator[None]:
        await self._acquire(key)
        try:
            yield
        finally:
            self._release()

    async def _acquire(self, key: int) -> None:
        if self._free > 0 and not self._waiting:
            self._free -= 1
            return
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiting, (key, next(self._arrivals), turn))
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                self._release()  # the slot was handed over as the waiter was cancelled
            raise

    def _release(self) -> None:
        while self._waiting:
            _, _, turn = heapq.heappop(self._waiting)
            if not turn.done():
                turn.set_result(None)
                return
        self._free += 1
