"""The bank's lifecycle schedule record (lifecycle_state); the Temporal side is in
server/lifecycle.py."""

from __future__ import annotations

from engine.db import Connection


def lifecycle_schedule_id(bank_id: str) -> str:
    return f"lifecycle:{bank_id}"


async def scheduled_cron(conn: Connection, bank_id: str) -> str | None:
    """The cron the bank's schedule was created with, or None when it has none yet."""
    value = await conn.fetchval("SELECT cron FROM lifecycle_state WHERE bank_id = $1", bank_id)
    return None if value is None else str(value)


async def record_schedule(conn: Connection, bank_id: str, cron: str) -> None:
    await conn.execute(
        "INSERT INTO lifecycle_state (bank_id, schedule_id, cron) VALUES ($1, $2, $3)"
        " ON CONFLICT (bank_id) DO UPDATE SET cron = EXCLUDED.cron",
        bank_id,
        lifecycle_schedule_id(bank_id),
        cron,
    )
