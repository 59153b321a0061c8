"""What an operator watches: how much memory there is and how much work is waiting.

Read at every Prometheus scrape, so each figure comes from an index or a small table:
memory_units by type from `memory_units_bank_type`, the consolidation backlog from
its own table `consolidation_backlog`, operations by status from `operations`.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.db import Connection

FACT_TYPES = ("world", "experience", "observation")
OPERATION_STATUSES = ("pending", "running", "completed", "failed", "cancelled")

_UNITS = "SELECT fact_type, count(*) AS n FROM memory_units GROUP BY fact_type"
_BACKLOG = "SELECT count(*) FROM consolidation_backlog"
_OPERATIONS = "SELECT kind, status, count(*) AS n FROM operations GROUP BY kind, status"
_BANKS = "SELECT count(*) FROM banks"


@dataclass(frozen=True)
class MemoryStatus:
    banks: int
    units: dict[str, int]  # by fact type, every type present
    consolidation_backlog: int  # facts not yet consolidated into observations
    operations: dict[tuple[str, str], int]  # (kind, status) -> count


async def memory_status(conn: Connection) -> MemoryStatus:
    units = dict.fromkeys(FACT_TYPES, 0)
    for row in await conn.fetch(_UNITS):
        units[row["fact_type"]] = row["n"]
    operations = {(r["kind"], r["status"]): r["n"] for r in await conn.fetch(_OPERATIONS)}
    return MemoryStatus(
        banks=await conn.fetchval(_BANKS),
        units=units,
        consolidation_backlog=await conn.fetchval(_BACKLOG),
        operations=operations,
    )
