"""Advisory locks shared by writers of different modules, so they are taken in one order.

A bank's consolidation step holds `consolidation_lock` for its transaction while it locks the
bank's facts and observations. Deleting a bank or a document, or forgetting facts, takes the
same lock first: otherwise the delete (bank row, then its facts by cascade) and the step (facts,
then the bank row through a foreign-key check) could each wait for the other, and PostgreSQL
aborted one of them as a deadlock.
"""

from __future__ import annotations

from engine.db import Connection

_CONSOLIDATION = (
    "SELECT pg_advisory_xact_lock(hashtextextended('consolidate' || E'\\x1f' || $1, 0))"
)


async def consolidation_lock(conn: Connection, bank_id: str) -> None:
    """Wait for the bank's running consolidation step, and keep the next one out until this
    transaction ends."""
    await conn.execute(_CONSOLIDATION, bank_id)
