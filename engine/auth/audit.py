"""The audit trail: who (key id), what (action, bank, operation), when, and the outcome of
every write, delete, forget, key and configuration change. Never the request body: memory
content stays in the memory tables."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import asyncpg

from engine.db import Connection
from engine.errors import NotFound


@dataclass(frozen=True)
class AuditEntry:
    action: str  # e.g. "DELETE /v1/default/banks/{bank_id}", "keys.create"
    transport: str  # http, mcp, cli, system
    bank_id: str | None
    key_id: str | None
    outcome: str  # success, denied, rejected, failed
    started_at: datetime
    ended_at: datetime | None = None
    status: int | None = None
    operation_id: str | None = None
    request: dict[str, Any] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    id: str = field(default_factory=lambda: str(uuid.uuid4()))


INSERT_AUDIT = """
INSERT INTO audit_logs (id, action, transport, bank_id, key_id, operation_id, status, outcome,
                        started_at, ended_at, request, metadata)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
"""
# Optional filters as NULL-or-equal, so one statement serves every combination.
_FILTER = """
WHERE bank_id = $1
  AND ($2::text IS NULL OR action = $2)
  AND ($3::text IS NULL OR transport = $3)
  AND ($4::timestamptz IS NULL OR started_at >= $4)
  AND ($5::timestamptz IS NULL OR started_at < $5)
"""
SELECT_AUDIT = f"""
SELECT id, action, transport, bank_id, key_id, operation_id, status, outcome, started_at,
       ended_at, request, metadata
FROM audit_logs {_FILTER}
ORDER BY started_at DESC, id
LIMIT $6 OFFSET $7
"""
COUNT_AUDIT = f"SELECT count(*) FROM audit_logs {_FILTER}"
SWEEP_AUDIT = "DELETE FROM audit_logs WHERE started_at < $1"
COUNT_BY_BUCKET = """
SELECT date_trunc($2, started_at, 'UTC') AS bucket, action, count(*) AS n
FROM audit_logs
WHERE bank_id = $1 AND started_at >= $3 AND ($4::text IS NULL OR action = $4)
GROUP BY 1, 2
ORDER BY 1, 2
"""


async def record_audit(conn: Connection, entry: AuditEntry) -> None:
    """Stores the entry; text PostgreSQL cannot hold (a NUL, a lone surrogate: what a refused
    request may carry in its path) is kept as its escape, `\\u0000`, so the attempt is on
    record too."""
    await conn.execute(
        INSERT_AUDIT,
        uuid.UUID(entry.id),
        entry.action,
        entry.transport,
        _storable(entry.bank_id),
        entry.key_id,
        _storable(entry.operation_id),
        entry.status,
        entry.outcome,
        entry.started_at,
        entry.ended_at,
        _storable(entry.request),
        _storable(entry.metadata),
    )


def _storable(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace("\x00", "\\u0000").encode("utf-8", "backslashreplace").decode()
    if isinstance(value, dict):
        return {_storable(k): _storable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_storable(v) for v in value]
    return value


def _entry(row: asyncpg.Record) -> AuditEntry:
    return AuditEntry(
        id=str(row["id"]),
        action=row["action"],
        transport=row["transport"],
        bank_id=row["bank_id"],
        key_id=row["key_id"],
        operation_id=row["operation_id"],
        status=row["status"],
        outcome=row["outcome"],
        started_at=row["started_at"],
        ended_at=row["ended_at"],
        request=row["request"],
        metadata=row["metadata"] or {},
    )


async def list_audit(
    conn: Connection,
    bank_id: str,
    *,
    action: str | None = None,
    transport: str | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
    limit: int = 50,
    offset: int = 0,
) -> tuple[list[AuditEntry], int]:
    """A bank's entries, most recent first, and how many match in all."""
    filters = (bank_id, action, transport, start, end)
    rows = await conn.fetch(SELECT_AUDIT, *filters, limit, offset)
    total = await conn.fetchval(COUNT_AUDIT, *filters)
    return [_entry(row) for row in rows], int(total or 0)


async def get_audit(conn: Connection, bank_id: str, log_id: str) -> AuditEntry:
    """One of a bank's entries; NotFound for an unknown id or another bank's entry."""
    try:
        key = uuid.UUID(log_id)
    except ValueError as exc:
        raise NotFound("audit log", log_id) from exc
    row = await conn.fetchrow(
        "SELECT id, action, transport, bank_id, key_id, operation_id, status, outcome,"
        " started_at, ended_at, request, metadata FROM audit_logs WHERE id = $1 AND bank_id = $2",
        key,
        bank_id,
    )
    if row is None:
        raise NotFound("audit log", log_id)
    return _entry(row)


async def sweep_audit(conn: Connection, before: datetime) -> int:
    """Delete entries older than the retention period; how many went."""
    status = await conn.execute(SWEEP_AUDIT, before)
    return int(status.split()[-1])


async def audit_counts(
    conn: Connection, bank_id: str, trunc: str, since: datetime, action: str | None = None
) -> dict[datetime, dict[str, int]]:
    """Entries per `trunc` bucket ("hour" or "day", UTC) and action since `since`."""
    buckets: dict[datetime, dict[str, int]] = {}
    for row in await conn.fetch(COUNT_BY_BUCKET, bank_id, trunc, since, action):
        buckets.setdefault(row["bucket"], {})[row["action"]] = int(row["n"])
    return buckets
