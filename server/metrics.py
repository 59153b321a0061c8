"""Prometheus series for the HTTP server, on a registry owned by the app (no globals)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from engine.db import Pool
from engine.store.status import MemoryStatus

LATENCY_BUCKETS = (0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class HTTPMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter(
            "engram_http_requests_total",
            "HTTP requests by route template, method and status.",
            ["route", "method", "status"],
            registry=registry,
        )
        self.latency = Histogram(
            "engram_http_request_duration_seconds",
            "HTTP request latency by route template and method.",
            ["route", "method"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.in_flight = Gauge(
            "engram_http_requests_in_flight",
            "Requests being served.",
            registry=registry,
            multiprocess_mode="livesum",  # with several processes: their sum
        )


class MemoryGauges(Collector):
    """The memory's size and waiting work, read from PostgreSQL at each scrape. A collector,
    not Gauge objects: with several server processes (PROMETHEUS_MULTIPROC_DIR) the scraped
    process's fresh reading is the answer, and a label set that vanished (an operation state
    now at zero) must vanish from the series too."""

    def __init__(self) -> None:
        self._status: MemoryStatus | None = None

    def update(self, status: MemoryStatus) -> None:
        self._status = status

    def mark_down(self) -> None:
        self._status = None

    def collect(self) -> Iterable[Metric]:
        status = self._status
        yield GaugeMetricFamily(
            "engram_memory_status_up",
            "1 when the last scrape read the memory status from PostgreSQL, else 0.",
            value=0 if status is None else 1,
        )
        banks = GaugeMetricFamily("engram_banks", "Memory banks.")
        units = GaugeMetricFamily("engram_memory_units", "Memory units by type.", labels=["type"])
        backlog = GaugeMetricFamily(
            "engram_consolidation_backlog_facts",
            "Facts waiting to be consolidated into observations.",
        )
        operations = GaugeMetricFamily(
            "engram_operations",
            "Operations by kind and status (pending and running ones are work in progress).",
            labels=["kind", "status"],
        )
        if status is not None:
            banks.add_metric([], status.banks)
            for fact_type, count in status.units.items():
                units.add_metric([fact_type], count)
            backlog.add_metric([], status.consolidation_backlog)
            for (kind, state), count in status.operations.items():
                operations.add_metric([kind, state], count)
        yield from (banks, units, backlog, operations)


class PoolCollector(Collector):
    """Reads the asyncpg pool's size at scrape time."""

    def __init__(self, get_pool: Callable[[], Pool | None]) -> None:
        self._get_pool = get_pool

    def collect(self) -> Iterable[Metric]:
        size = GaugeMetricFamily("engram_db_pool_size", "Open connections in the pool.")
        idle = GaugeMetricFamily("engram_db_pool_idle", "Idle connections in the pool.")
        pool = self._get_pool()
        if pool is not None:
            size.add_metric([], pool.get_size())
            idle.add_metric([], pool.get_idle_size())
        yield size
        yield idle


def route_template(routes: Sequence[BaseRoute], scope: Scope) -> str:
    """The matched route's path template, so label values stay bounded."""
    for route in routes:
        match, _ = route.matches(scope)
        if match == Match.FULL:
            return str(getattr(route, "path", "other"))
    return "unmatched"


class MetricsMiddleware:
    def __init__(self, app: ASGIApp, metrics: HTTPMetrics, routes: Sequence[BaseRoute]) -> None:
        self.app = app
        self.metrics = metrics
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        route = route_template(self.routes, scope)
        method = scope["method"]
        status = 500
        started = time.perf_counter()
        recorded = False

        def record() -> None:
            nonlocal recorded
            if not recorded:
                recorded = True
                self.metrics.latency.labels(route, method).observe(time.perf_counter() - started)
                self.metrics.requests.labels(route, method, str(status)).inc()

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                # Counted before the last byte leaves: a client that reads the answer and
                # scrapes /metrics at once must find its request there.
                record()
            await send(message)

        self.metrics.in_flight.inc()
        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            self.metrics.in_flight.dec()
            record()
