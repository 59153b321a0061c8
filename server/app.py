"""The Starlette application, wired explicitly: routes, middleware, lifespan."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import asyncpg
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.multiprocess import MultiProcessCollector
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from engine.db import Pool, pending_migrations
from engine.settings import DEFAULT_MAX_IN_FLIGHT
from engine.store.status import memory_status
from server.console_routes import console_routes
from server.errors import EXCEPTION_HANDLERS
from server.mcp_server.server import mcp_routes
from server.metrics import HTTPMetrics, MemoryGauges, MetricsMiddleware, PoolCollector
from server.middleware import AdmissionMiddleware, ErrorMiddleware
from server.openapi import ApiRoute
from server.recall_metrics import RecallMetrics
from server.reference import reference_routes
from server.responses import LiveResponse, VersionResponse
from server.routes import api_routes
from server.security import SecurityMiddleware
from server.services import Services

log = logging.getLogger("engram.server")

ENGRAM_VERSION = "0.1.0"
# A scrape must answer even when PostgreSQL does not: the status read gets this long.
STATUS_TIMEOUT_S = 2.0
ServicesFactory = Callable[[], AbstractAsyncContextManager[Services]]


async def health(request: Request) -> Response:
    return JSONResponse({"status": "healthy"})


async def ready(request: Request) -> Response:
    """200 only when the database answers, migrations are applied and Temporal answers."""
    services: Services | None = getattr(request.app.state, "services", None)
    checks: dict[str, str] = {}
    if services is None:
        return JSONResponse(
            {"status": "starting", "detail": "the server is starting", "checks": checks},
            status_code=503,
        )
    try:
        async with services.pool.acquire() as conn:
            pending = await pending_migrations(conn)
        checks["database"] = "ok" if not pending else f"pending migrations: {', '.join(pending)}"
    except (OSError, RuntimeError) as exc:
        checks["database"] = f"unreachable: {exc}"
    try:
        await services.temporal.service_client.check_health()
        checks["temporal"] = "ok"
    except (OSError, RuntimeError) as exc:
        checks["temporal"] = f"unreachable: {exc}"
    ok = all(value == "ok" for value in checks.values())
    body: dict[str, object] = {"status": "ready" if ok else "not ready", "checks": checks}
    if not ok:
        body["detail"] = "; ".join(f"{k}: {v}" for k, v in checks.items() if v != "ok")
    return JSONResponse(body, status_code=200 if ok else 503)


FEATURES = (
    "observations",
    "mcp",
    "worker",
    "bank_config_api",
    "bank_llm_health",
    "file_upload_api",
    "llm_trace",
    "document_export_api",
    "document_import_api",
    "audit_log",
    "store_document_text",
)


async def version(request: Request) -> Response:
    return JSONResponse(
        {
            "api_version": "v1",
            "engram_version": ENGRAM_VERSION,
            # Every feature Hindsight's clients ask about is served (document export and
            # import through the transfer routes: docs/transfer.md).
            "features": dict.fromkeys(FEATURES, True),
        }
    )


async def live(request: Request) -> Response:
    uptime = time.monotonic() - request.app.state.started
    return JSONResponse(
        {
            "status": "alive",
            "version": ENGRAM_VERSION,
            "uptime_seconds": uptime,
            "pid": os.getpid(),  # which of several server processes answered
        }
    )


def create_app(
    open_services: ServicesFactory, max_in_flight: int = DEFAULT_MAX_IN_FLIGHT
) -> Starlette:
    """`max_in_flight`: API requests in progress before more are shed with a 503."""
    registry = CollectorRegistry()
    metrics = HTTPMetrics(registry)
    # What /metrics answers. With several server processes (server/processes.py sets
    # PROMETHEUS_MULTIPROC_DIR) the counters and histograms of all of them, summed from their
    # files, so a scrape that lands on any one process sees the whole server.
    exposition = registry
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        exposition = CollectorRegistry()
        MultiProcessCollector(exposition)  # type: ignore[no-untyped-call]
    gauges = MemoryGauges()
    exposition.register(gauges)
    # process_resident_memory_bytes, _cpu_seconds_total: of the process that answers.
    ProcessCollector(registry=exposition)

    async def metrics_endpoint(request: Request) -> Response:
        services: Services | None = getattr(request.app.state, "services", None)
        if services is not None:
            try:
                async with services.pool.acquire(timeout=STATUS_TIMEOUT_S) as conn:
                    gauges.update(await memory_status(conn))
            except (asyncpg.PostgresError, OSError, TimeoutError) as exc:
                log.warning("metrics: cannot read the memory status: %s", exc)
                gauges.mark_down()
        return Response(generate_latest(exposition), media_type=CONTENT_TYPE_LATEST)

    routes: list[BaseRoute] = [
        Route("/health", health, methods=["GET"]),
        Route("/ready", ready, methods=["GET"]),
        ApiRoute(
            "/health/live",
            live,
            methods=["GET"],
            tag="monitoring",
            summary="Liveness",
            response=LiveResponse,
        ),
        Route("/health/ready", ready, methods=["GET"]),
        ApiRoute(
            "/version",
            version,
            methods=["GET"],
            tag="monitoring",
            summary="API version and features",
            response=VersionResponse,
        ),
        ApiRoute(
            "/metrics",
            metrics_endpoint,
            methods=["GET"],
            tag="monitoring",
            summary="Prometheus metrics (text exposition format)",
            response_media="text/plain",
        ),
        *api_routes(),
        *reference_routes(ENGRAM_VERSION),
        *mcp_routes(),
        *console_routes(),
    ]

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with open_services() as services:
            app.state.services = services
            yield

    app = Starlette(
        routes=routes,
        middleware=[
            Middleware(ErrorMiddleware),
            Middleware(MetricsMiddleware, metrics=metrics, routes=routes),
            Middleware(AdmissionMiddleware, limit=max_in_flight),
            Middleware(SecurityMiddleware, routes=routes),
        ],
        exception_handlers=EXCEPTION_HANDLERS,
        lifespan=lifespan,
    )

    def current_pool() -> Pool | None:
        services: Services | None = getattr(app.state, "services", None)
        return None if services is None else services.pool

    exposition.register(PoolCollector(current_pool))
    app.state.recall_metrics = RecallMetrics(registry)
    app.state.started = time.monotonic()
    return app
