"""The consolidation backlog (migration 0033): the facts waiting to be consolidated, one row
each in `consolidation_backlog`. A trigger adds every fact memory_units stores; consolidation
takes facts off (`take_off_backlog`) in the transaction that applied them; what undoes an
observation puts its facts back (`requeue`)."""

from __future__ import annotations

from collections.abc import Sequence

from engine.db import Connection


def consolidated(alias: str) -> str:
    """The condition "the fact `alias` (of memory_units) is off the backlog": a probe of the
    backlog's primary key."""
    return f"NOT EXISTS (SELECT 1 FROM consolidation_backlog cb WHERE cb.fact_id = {alias}.id)"


def requeue_statement(where: str) -> str:
    """Put the facts of memory_units (alias `m`) matching `where` back on the backlog. Their
    rows are locked first, as the update of `consolidated_at` did: a batch consolidating one
    of them holds it, and the fact must go back after that batch took it off, not before."""
    return f"""
WITH facts AS MATERIALIZED (
    SELECT m.id, m.bank_id, coalesce(m.occurred_start, m.mentioned_at, m.created_at) AS event_at
    FROM memory_units m
    WHERE m.fact_type <> 'observation' AND ({where})
    ORDER BY m.id
    FOR NO KEY UPDATE OF m
)
INSERT INTO consolidation_backlog (fact_id, bank_id, event_at)
SELECT id, bank_id, event_at FROM facts
ON CONFLICT DO NOTHING
"""


_REQUEUE = requeue_statement("m.bank_id = $1 AND m.id = ANY($2::uuid[])")
_TAKE_OFF = "DELETE FROM consolidation_backlog WHERE fact_id = ANY($1::uuid[])"


async def requeue(conn: Connection, bank_id: str, fact_ids: Sequence[str]) -> None:
    """These facts of the bank wait for consolidation again."""
    await conn.execute(_REQUEUE, bank_id, list(fact_ids))


async def take_off_backlog(conn: Connection, fact_ids: Sequence[str]) -> None:
    """These facts are consolidated (in the caller's transaction)."""
    await conn.execute(_TAKE_OFF, list(fact_ids))
