"""The version record of a fact (memory_versions) and its history as the API shows it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from engine.db import Connection

_RECORD = """
INSERT INTO memory_versions (bank_id, memory_id, change, previous_text, new_text, previous,
                             reason, related_id)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
"""

_HISTORY = """
SELECT v.id, v.change, v.previous_text, v.new_text, v.previous, v.reason,
       v.related_id::text AS related_id, v.changed_at
FROM memory_versions v WHERE v.memory_id = $1 AND v.bank_id = $2 ORDER BY v.id DESC
"""


@dataclass(frozen=True)
class FactVersion:
    version: int
    change: str
    previous_text: str | None
    new_text: str | None
    previous: dict[str, Any]
    reason: str
    related_id: str | None
    changed_at: datetime


async def record_version(
    conn: Connection,
    bank_id: str,
    memory_id: str,
    change: str,
    *,
    previous_text: str | None = None,
    new_text: str | None = None,
    previous: dict[str, Any] | None = None,
    reason: str = "",
    related_id: str | None = None,
) -> None:
    await conn.execute(
        _RECORD,
        bank_id,
        memory_id,
        change,
        previous_text,
        new_text,
        previous or {},
        reason,
        related_id,
    )


async def fact_history(conn: Connection, bank_id: str, memory_id: str) -> list[FactVersion]:
    """Newest first, numbered from 1 (the oldest change)."""
    try:
        rows = await conn.fetch(_HISTORY, memory_id, bank_id)
    except asyncpg.DataError:
        return []
    return [
        FactVersion(
            version=len(rows) - i,
            change=r["change"],
            previous_text=r["previous_text"],
            new_text=r["new_text"],
            previous=dict(r["previous"]),
            reason=r["reason"],
            related_id=r["related_id"],
            changed_at=r["changed_at"],
        )
        for i, r in enumerate(rows)
    ]
