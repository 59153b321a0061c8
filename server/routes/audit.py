"""`GET .../audit-logs`: a bank's audit trail in Hindsight's shape (AuditLogListResponse)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from engine.auth.audit import AuditEntry, audit_counts, get_audit, list_audit
from engine.errors import InvalidInput
from engine.store.banks import get_bank
from engine.validation import check_instant
from server.http import int_param, iso, json_response, path_param, services_of, text_param
from server.lifecycle_responses import AuditLogEntryResponse
from server.openapi import ApiRoute


def _date(request: Request, name: str) -> datetime | None:
    raw = text_param(request, name)
    if raw is None:
        return None
    try:
        value = datetime.fromisoformat(raw)
    except ValueError as exc:
        raise InvalidInput(name, "must be an ISO-8601 date-time") from exc
    if value.tzinfo is None:
        raise InvalidInput(name, "must have a time zone (e.g. Z or +00:00)")
    return check_instant(value, name)


def entry_json(entry: AuditEntry) -> dict[str, Any]:
    duration = None
    if entry.ended_at is not None:
        duration = round((entry.ended_at - entry.started_at).total_seconds() * 1000)
    return {
        "id": entry.id,
        "action": entry.action,
        "transport": entry.transport,
        "bank_id": entry.bank_id,
        "started_at": iso(entry.started_at),
        "ended_at": iso(entry.ended_at),
        "duration_ms": duration,
        "request": entry.request,
        "response": {"status": entry.status, "operation_id": entry.operation_id},
        # hindsight-client 1.1 reads only the summary fields: who and the outcome go here too.
        "metadata": {
            **entry.metadata,
            "key_id": entry.key_id,
            "outcome": entry.outcome,
            "status": entry.status,
            "operation_id": entry.operation_id,
        },
    }


async def list_audit_logs(request: Request) -> Response:
    bank_id = path_param(request, "bank_id")
    limit = int_param(request, "limit", 50, low=1, high=500)
    offset = int_param(request, "offset", 0, high=10**9)
    start, end = _date(request, "start_date"), _date(request, "end_date")
    async with services_of(request).pool.acquire() as conn:
        await get_bank(conn, bank_id)
        entries, total = await list_audit(
            conn,
            bank_id,
            action=text_param(request, "action"),
            transport=text_param(request, "transport"),
            start=start,
            end=end,
            limit=limit,
            offset=offset,
        )
    return json_response(
        {
            "bank_id": bank_id,
            "total": total,
            "limit": limit,
            "offset": offset,
            "items": [entry_json(e) for e in entries],
        }
    )


# Hindsight's periods, and the bucket each is counted in.
PERIODS = {"1d": (timedelta(days=1), "hour"), "7d": (timedelta(days=7), "day")}
PERIODS["30d"] = (timedelta(days=30), "day")


async def audit_log_stats(request: Request) -> Response:
    bank_id = path_param(request, "bank_id")
    period = request.query_params.get("period") or "7d"
    if period not in PERIODS:
        raise InvalidInput("period", f"must be one of {', '.join(PERIODS)}")
    span, trunc = PERIODS[period]
    start = datetime.now(UTC) - span
    async with services_of(request).pool.acquire() as conn:
        await get_bank(conn, bank_id)
        counts = await audit_counts(conn, bank_id, trunc, start, text_param(request, "action"))
    return json_response(
        {
            "bank_id": bank_id,
            "period": period,
            "trunc": trunc,
            "start": iso(start),
            "buckets": [
                {"time": iso(time), "actions": actions, "total": sum(actions.values())}
                for time, actions in sorted(counts.items())
            ],
        }
    )


async def get_audit_log(request: Request) -> Response:
    bank_id = path_param(request, "bank_id")
    async with services_of(request).pool.acquire() as conn:
        await get_bank(conn, bank_id)
        entry = await get_audit(conn, bank_id, path_param(request, "log_id"))
    return json_response(entry_json(entry))


def routes() -> list[Route]:
    base = "/v1/default/banks/{bank_id}/audit-logs"
    return [
        Route(base, list_audit_logs, methods=["GET"]),
        Route(base + "/stats", audit_log_stats, methods=["GET"]),
        ApiRoute(
            base + "/{log_id}",
            get_audit_log,
            methods=["GET"],
            tag="audit",
            summary="One audit log entry",
            response=AuditLogEntryResponse,
        ),
    ]
