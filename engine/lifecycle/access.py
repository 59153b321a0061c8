"""Reinforcement: recall records the facts it returned, flushed in batches off the request path.

`record` only adds ids to an in-memory counter (no I/O, no await), so a recall (or a reflect
answer, for the facts it rests on: server/routes/reflect.py) never waits for it; `run`
flushes every `interval` seconds (or sooner once `max_pending` ids wait) with one statement per
bank, at the bank's `reinforce_step` (its lifecycle policy, read at flush time; a bank
deleted meanwhile is skipped). A crash loses at most one interval's accesses, which the
issue accepts.
Reinforcement: access_count += n, last_accessed_at = now, and per access
    strength ← strength + step · (1 − strength)
(n accesses: strength ← 1 − (1 − strength)·(1 − step)^n), so strength approaches 1 and never
passes it. A flush records them beside the fact (engine/lifecycle/access_state.py), where every
reader sees them and the lifecycle batch folds them into the fact.
An archived fact that recall returned (include_archived) is not restored by access alone:
restoring needs new evidence (engine/lifecycle/maintenance.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from datetime import UTC, datetime

import asyncpg

from engine.db import Connection, Pool
from engine.errors import NotFound
from engine.store.banks import get_bank

log = logging.getLogger(__name__)

# A flush writes the accesses into the narrow side table fact_access (migration 0041,
# engine/lifecycle/access_state.py), one ~80-byte row per fact upserted in place, never the
# fact's own ~1.3 kB row: measured through real server processes at 100k facts
# (docs/benchmarks.md "Reinforcement's writes"). Only ids of the bank's facts are written (a
# read of each fact's key, no lock on it: a writer of the fact never waits for a flush nor a
# flush for it, and a fact erased before the flush gets no row). Side rows are upserted in id
# order, so two flushes (two server processes) queue behind each other and never deadlock;
# the lifecycle folding a range of them skips those a flush holds, so it never waits for one,
# while a flush waits for the fold's transaction to end and then adds a new row: no access is
# lost to the lifecycle.
REINFORCE_SQL = """
INSERT INTO fact_access AS f (bank_id, fact_id, accesses, last_accessed_at, keep)
SELECT $1, a.id, a.n, $3, power(1 - $4::float8, a.n)
FROM unnest($2::uuid[], $5::int[]) AS a(id, n)
WHERE EXISTS (SELECT 1 FROM memory_units m WHERE m.id = a.id AND m.bank_id = $1)
ORDER BY a.id
ON CONFLICT (bank_id, fact_id) DO UPDATE SET
    accesses = f.accesses + excluded.accesses,
    last_accessed_at = greatest(f.last_accessed_at, excluded.last_accessed_at),
    keep = f.keep * excluded.keep
"""

DEFAULT_STEP = 0.2


async def reinforce(
    conn: Connection,
    bank_id: str,
    counts: dict[str, int],
    now: datetime,
    step: float = DEFAULT_STEP,
) -> int:
    """Apply `counts` (fact id → accesses) now; returns the facts updated. Also what reflect's
    citations call."""
    if not counts:
        return 0
    ids = sorted(counts)
    status = await conn.execute(REINFORCE_SQL, bank_id, ids, now, step, [counts[i] for i in ids])
    return int(status.rsplit(" ", 1)[-1])


class AccessBuffer:
    def __init__(self, pool: Pool, *, interval: float = 5.0, max_pending: int = 5000) -> None:
        self._pool = pool
        self._interval = interval
        self._max_pending = max_pending
        self._pending: dict[str, Counter[str]] = {}
        self._size = 0
        self._wake = asyncio.Event()

    @property
    def pending(self) -> int:
        return self._size

    def record(self, bank_id: str, fact_ids: list[str]) -> None:
        counter = self._pending.setdefault(bank_id, Counter())
        counter.update(fact_ids)
        self._size += len(fact_ids)
        if self._size >= self._max_pending:
            self._wake.set()

    async def flush(self) -> int:
        """Write what is pending; what fails to write is dropped (logged), never retried
        into an unbounded backlog."""
        pending, self._pending, self._size = self._pending, {}, 0
        written = 0
        now = datetime.now(UTC)
        for bank_id, counts in pending.items():
            try:
                async with self._pool.acquire() as conn:
                    step = (await get_bank(conn, bank_id)).config.lifecycle_policy.reinforce_step
                    written += await reinforce(conn, bank_id, dict(counts), now, step)
            except NotFound:
                log.info("dropped %d accesses of bank %s: deleted", len(counts), bank_id)
            except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
                log.warning("dropped %d accesses of bank %s: %s", len(counts), bank_id, exc)
        return written

    async def run(self) -> None:
        """Flush until cancelled; the last flush happens on the way out."""
        try:
            while True:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self._interval)
                self._wake.clear()
                await self.flush()
        finally:
            await asyncio.shield(self.flush())
