"""The LLM request log (`.../llm-requests`, `.../llm-requests/stats`) and a bank's LLM health
check (`POST .../health/llm`, which makes one tiny model call and logs it too)."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from engine.llm import LLMClient, LLMOutputError, LLMRequestError, llm_scope
from engine.store.banks import get_bank
from engine.store.insights import PERIODS
from engine.store.llm_requests import (
    LLMRequestLog,
    LLMRequestRow,
    list_llm_requests,
    llm_request_stats,
)
from server.http import choice_param, int_param, iso, json_response, path_param, services_of
from server.openapi import ApiRoute
from server.queries import Limit, Offset
from server.responses import BankLlmHealthResponse, LLMRequestListResponse, LLMRequestStatsResponse

OPERATIONS = ("retain", "consolidation", "reflect", "health", "other")


class LLMRequestsQuery(BaseModel):
    status: Literal["success", "error"] | None = None
    operation: Literal["retain", "consolidation", "reflect", "health", "other"] | None = None
    limit: Limit | None = None
    offset: Offset | None = None


class LLMStatsQuery(BaseModel):
    operation: Literal["retain", "consolidation", "reflect", "health", "other"] | None = None
    period: Literal["1h", "12h", "1d", "7d", "30d", "90d"] | None = None


def entry_json(row: LLMRequestRow) -> dict[str, Any]:
    return {
        "id": row.id,
        "bank_id": row.bank_id,
        "operation": row.operation,
        "scope": row.operation,
        "trace_id": None,
        "span_id": None,
        "parent_span_id": None,
        "provider": "openai-compatible",
        "model": row.model,
        "status": row.status,
        "started_at": iso(row.started_at),
        "ended_at": iso(row.ended_at),
        "duration_ms": row.duration_ms,
        "input_tokens": row.input_tokens,
        "output_tokens": row.output_tokens,
        "cached_tokens": 0,
        "total_tokens": row.total_tokens,
        "error": row.error,
        "llm_info": None,
        "metadata": None,
    }


async def list_requests(request: Request) -> Response:
    bank_id = path_param(request, "bank_id")
    status = choice_param(request, "status", ("success", "error"))
    operation = choice_param(request, "operation", OPERATIONS)
    limit = int_param(request, "limit", 50, high=500)
    offset = int_param(request, "offset", 0, high=10**9)
    async with services_of(request).pool.acquire() as conn:
        await get_bank(conn, bank_id)
        rows, total = await list_llm_requests(conn, bank_id, status, operation, limit, offset)
    return json_response(
        {
            "bank_id": bank_id,
            "total": total,
            "limit": limit,
            "offset": offset,
            "items": [entry_json(r) for r in rows],
        }
    )


async def stats(request: Request) -> Response:
    bank_id = path_param(request, "bank_id")
    period = choice_param(request, "period", tuple(PERIODS)) or "1d"
    operation = choice_param(request, "operation", OPERATIONS)
    span, trunc = PERIODS[period]
    start = datetime.now(UTC) - span
    async with services_of(request).pool.acquire() as conn:
        await get_bank(conn, bank_id)
        buckets = await llm_request_stats(conn, bank_id, trunc, start, operation)
    return json_response(
        {
            "bank_id": bank_id,
            "period": period,
            "trunc": trunc,
            "start": iso(start),
            "buckets": [
                {
                    "time": iso(b.time),
                    "statuses": b.statuses,
                    "total": sum(b.statuses.values()),
                    "tokens": {
                        "input": b.input_tokens,
                        "output": b.output_tokens,
                        "cached": 0,
                        "total": b.input_tokens + b.output_tokens,
                    },
                }
                for b in buckets
            ],
        }
    )


async def health(request: Request) -> Response:
    """One short model call with the server's LLM settings, for each operation that uses the
    model in this bank; all share one endpoint and model, so one call answers for all."""
    bank_id = path_param(request, "bank_id")
    services = services_of(request)
    async with services.pool.acquire() as conn:
        bank = await get_bank(conn, bank_id)
    settings = services.settings
    if not settings.llm.configured:
        status, error, latency = "not_configured", "no LLM key is set (ENGRAM_LLM_API_KEY)", None
    else:
        clock = time.perf_counter()
        try:
            async with LLMClient(settings.llm, LLMRequestLog(services.pool)) as llm:
                with llm_scope(bank_id, "health"):
                    await llm.chat([{"role": "user", "content": "Reply with OK."}], max_tokens=5)
            status, error = "ok", None
        except (LLMRequestError, LLMOutputError) as exc:
            status, error = "error", str(exc)
        latency = int((time.perf_counter() - clock) * 1000)
    retain_uses_llm = (bank.config.extraction_mode or settings.default_extraction_mode) == "llm"
    operations = [
        ("retain", retain_uses_llm and settings.llm.configured),
        ("consolidation", settings.llm.configured),
        ("reflect", settings.llm.configured),
    ]
    return json_response(
        {
            "bank_id": bank_id,
            "operations": [
                {
                    "operation": name,
                    "uses_llm": uses,
                    "status": status if uses or status == "not_configured" else "not_used",
                    "model": settings.llm.model,
                    "latency_ms": latency,
                    "error": error,
                }
                for name, uses in operations
            ],
        }
    )


def routes() -> list[BaseRoute]:
    base = "/v1/default/banks/{bank_id}"
    return [
        ApiRoute(
            base + "/llm-requests",
            list_requests,
            methods=["GET"],
            tag="monitoring",
            summary="The bank's LLM calls, newest first (model, tokens, latency, outcome)",
            query=LLMRequestsQuery,
            response=LLMRequestListResponse,
        ),
        ApiRoute(
            base + "/llm-requests/stats",
            stats,
            methods=["GET"],
            tag="monitoring",
            summary="LLM calls and tokens per time bucket, by outcome",
            query=LLMStatsQuery,
            response=LLMRequestStatsResponse,
        ),
        ApiRoute(
            base + "/health/llm",
            health,
            methods=["POST"],
            tag="monitoring",
            summary="Check that the bank's LLM answers (one short call)",
            response=BankLlmHealthResponse,
        ),
    ]
