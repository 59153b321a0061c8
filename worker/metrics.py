"""The worker's Prometheus endpoint: Engram's activity series plus the Temporal SDK's own.

The SDK's exporter binds a loopback port of its own; `SDKMetricsProxy` re-exposes what it serves
so operators scrape one endpoint. Workflow counts, failures and end-to-end latency by workflow
type come from the SDK (`temporal_workflow_completed_total`, `temporal_workflow_failed_total`,
`temporal_workflow_endtoend_latency`); activity series are ours, labelled by activity type.
"""

from __future__ import annotations

import asyncio
import time
import urllib.error
import urllib.request
from collections.abc import Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector
from temporalio import activity
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
)

from engine.lifecycle.payloads import LifecycleBatchResult

DURATION_BUCKETS = (0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)


class ActivityMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.started = Counter(
            "engram_activity_started_total",
            "Activity attempts started, by activity type.",
            ["activity"],
            registry=registry,
        )
        self.finished = Counter(
            "engram_activity_finished_total",
            "Activity attempts finished, by activity type and outcome (ok, failed, cancelled).",
            ["activity", "outcome"],
            registry=registry,
        )
        self.lifecycle = Counter(
            "engram_lifecycle_facts_total",
            "Memories the scheduled lifecycle touched, by action (decayed, archived, merged,"
            " deleted).",
            ["action"],
            registry=registry,
        )
        self.duration = Histogram(
            "engram_activity_duration_seconds",
            "Activity attempt duration, by activity type.",
            ["activity"],
            buckets=DURATION_BUCKETS,
            registry=registry,
        )


class _ActivityInbound(ActivityInboundInterceptor):
    def __init__(self, nxt: ActivityInboundInterceptor, metrics: ActivityMetrics) -> None:
        super().__init__(nxt)
        self._metrics = metrics

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        name = activity.info().activity_type
        self._metrics.started.labels(name).inc()
        started = time.perf_counter()
        outcome = "failed"
        try:
            result = await super().execute_activity(input)
            outcome = "ok"
            if isinstance(result, LifecycleBatchResult):
                for action in ("decayed", "archived", "merged", "deleted"):
                    self._metrics.lifecycle.labels(action).inc(getattr(result, action))
            return result
        except asyncio.CancelledError:
            outcome = "cancelled"
            raise
        finally:
            self._metrics.duration.labels(name).observe(time.perf_counter() - started)
            self._metrics.finished.labels(name, outcome).inc()


class MetricsInterceptor(Interceptor):
    def __init__(self, metrics: ActivityMetrics) -> None:
        self._metrics = metrics

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _ActivityInbound(next, self._metrics)


class SDKMetricsProxy(Collector):
    """Fetches the SDK exporter's text at scrape time and yields its families."""

    def __init__(self, url: str) -> None:
        self._url = url

    def collect(self) -> Iterable[Metric]:
        try:
            with urllib.request.urlopen(self._url, timeout=2) as response:
                text = response.read().decode()
        except (urllib.error.URLError, OSError):
            return
        yield from text_string_to_metric_families(text)
