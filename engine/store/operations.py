"""Operations: the durable record of asynchronous work (retain, import, consolidation)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from engine.db import Connection
from engine.errors import Conflict, NotFound

STATUSES = ("pending", "running", "completed", "failed", "cancelled")


@dataclass(frozen=True)
class Operation:
    operation_id: str
    bank_id: str
    kind: str
    workflow_id: str
    status: str
    progress: dict[str, Any]
    result: dict[str, Any] | None
    error: str | None
    created_at: datetime
    updated_at: datetime


_COLUMNS = (
    "operation_id, bank_id, kind, workflow_id, status, progress, result, error, created_at,"
    " updated_at"
)


def _operation(row: asyncpg.Record) -> Operation:
    return Operation(**dict(row))


async def register_operation(
    conn: Connection,
    operation_id: str,
    bank_id: str,
    kind: str,
    workflow_id: str,
    request_hash: str,
) -> tuple[Operation, bool]:
    """Record a new operation; returns (operation, created). The same id for the same request
    returns the existing one; for a different request it is a Conflict. A bank that no longer
    exists is NotFound: work that outlived its bank's deletion (a consolidation starting as
    the bank went) must not leave a row for a re-created bank of the same name to inherit."""
    row = await conn.fetchrow(
        f"INSERT INTO operations (operation_id, bank_id, kind, workflow_id, request_hash)"
        f" SELECT $1, $2, $3, $4, $5 WHERE EXISTS (SELECT 1 FROM banks WHERE bank_id = $2)"
        f" ON CONFLICT (operation_id) DO NOTHING"
        f" RETURNING {_COLUMNS}",
        operation_id,
        bank_id,
        kind,
        workflow_id,
        request_hash,
    )
    if row is not None:
        return _operation(row), True
    existing = await conn.fetchrow(
        f"SELECT {_COLUMNS}, request_hash FROM operations WHERE operation_id = $1", operation_id
    )
    if existing is None:
        raise NotFound("bank", bank_id)
    if existing["request_hash"] != request_hash or existing["bank_id"] != bank_id:
        raise Conflict(f"operation_id {operation_id!r} was already used for a different request")
    values = dict(existing)
    values.pop("request_hash")
    return Operation(**values), False


async def update_operation(
    conn: Connection,
    operation_id: str,
    status: str,
    progress: dict[str, Any] | None = None,
    result: dict[str, Any] | None = None,
    error: str | None = None,
) -> None:
    """Terminal states are final: a late 'running' never overwrites 'completed'."""
    await conn.execute(
        "UPDATE operations SET status = $2, progress = coalesce($3, progress),"
        " result = coalesce($4, result), error = coalesce($5, error), updated_at = now()"
        " WHERE operation_id = $1"
        "   AND (status NOT IN ('completed', 'failed', 'cancelled') OR status = $2)",
        operation_id,
        status,
        progress,
        result,
        error,
    )


async def get_operation(conn: Connection, bank_id: str, operation_id: str) -> Operation:
    row = await conn.fetchrow(
        f"SELECT {_COLUMNS} FROM operations WHERE operation_id = $1 AND bank_id = $2",
        operation_id,
        bank_id,
    )
    if row is None:
        raise NotFound("operation", operation_id)
    return _operation(row)


async def list_operations(
    conn: Connection,
    bank_id: str,
    status: str | None = None,
    limit: int = 100,
    offset: int = 0,
) -> tuple[list[Operation], int]:
    rows = await conn.fetch(
        f"SELECT {_COLUMNS} FROM operations WHERE bank_id = $1"
        " AND ($2::text IS NULL OR status = $2) ORDER BY created_at DESC LIMIT $3 OFFSET $4",
        bank_id,
        status,
        limit,
        offset,
    )
    total = await conn.fetchval(
        "SELECT count(*) FROM operations WHERE bank_id = $1 AND ($2::text IS NULL OR status = $2)",
        bank_id,
        status,
    )
    return [_operation(r) for r in rows], int(total)


async def open_workflow_ids(conn: Connection, bank_id: str) -> list[str]:
    """Workflows of the bank's operations still pending or running."""
    rows = await conn.fetch(
        "SELECT workflow_id FROM operations"
        " WHERE bank_id = $1 AND status IN ('pending', 'running') ORDER BY created_at",
        bank_id,
    )
    return [row["workflow_id"] for row in rows]


async def delete_operation(conn: Connection, bank_id: str, operation_id: str) -> None:
    """Forget a finished operation's record; a pending or running one is a Conflict."""
    status = await conn.fetchval(
        "SELECT status FROM operations WHERE bank_id = $1 AND operation_id = $2",
        bank_id,
        operation_id,
    )
    if status is None:
        raise NotFound("operation", operation_id)
    if status not in ("completed", "failed", "cancelled"):
        raise Conflict(f"operation {operation_id} is still {status}; cancel it first")
    await conn.execute(
        "DELETE FROM operations WHERE bank_id = $1 AND operation_id = $2 AND status = $3",
        bank_id,
        operation_id,
        status,
    )


async def reopen_operation(
    conn: Connection, bank_id: str, operation_id: str, workflow_id: str
) -> Operation:
    """A failed or cancelled operation back to pending, run by a new workflow (a retry). Only
    one of two concurrent retries finds it closed: the other is a Conflict."""
    row = await conn.fetchrow(
        f"UPDATE operations SET status = 'pending', error = NULL, workflow_id = $3,"
        f" progress = '{{}}'::jsonb, updated_at = now()"
        f" WHERE operation_id = $1 AND bank_id = $2 AND status IN ('failed', 'cancelled')"
        f" RETURNING {_COLUMNS}",
        operation_id,
        bank_id,
        workflow_id,
    )
    if row is None:
        current = await get_operation(conn, bank_id, operation_id)
        raise Conflict(
            f"operation {operation_id} is {current.status}; only a failed or cancelled"
            " operation can be retried"
        )
    return _operation(row)
