"""deploy/grafana's dashboard queries only series that Engram's processes export.

The engram_* and process_* series come from the server's /metrics and the worker's registry;
the temporal_* series from the Temporal SDK's own exporter, read after a real workflow ran
on a worker built the way worker/main.py builds it.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import uuid
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from temporalio import activity, workflow
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import ApplicationError
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from worker.metrics import ActivityMetrics, SDKMetricsProxy

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "engram-dashboard.json"
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}
SERIES = re.compile(r"\b((?:engram|process|temporal)_[a-z_]+)\b")


@activity.defn
async def say(name: str) -> str:
    return f"hello {name}"


@workflow.defn(sandboxed=False)
class Hello:
    @workflow.run
    async def run(self, name: str) -> str:
        return await workflow.execute_activity(
            say, name, start_to_close_timeout=timedelta(seconds=30)
        )


@workflow.defn(sandboxed=False)
class Fails:
    """The SDK creates a counter at its first increment: a failure makes the failed one."""

    @workflow.run
    async def run(self, reason: str) -> str:
        raise ApplicationError(reason, non_retryable=True)


def queried_series() -> set[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]
    exprs += [v.get("query", "") for v in dashboard["templating"]["list"]]
    return {name for expr in exprs for name in SERIES.findall(expr)}


def exported(text: str) -> set[str]:
    names: set[str] = set()
    for family in text_string_to_metric_families(text):
        names |= {family.name + s for s in SUFFIXES.get(family.type, ("",))}
        names |= {sample.name for sample in family.samples}
    return names


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def worker_endpoint_series(temporal_env: WorkflowEnvironment) -> set[str]:
    """What the worker's endpoint serves: our activity series, the process collector and
    the SDK's exporter re-exposed through SDKMetricsProxy (worker/main.py's wiring)."""
    port = free_port()
    runtime = Runtime(
        telemetry=TelemetryConfig(metrics=PrometheusConfig(bind_address=f"127.0.0.1:{port}"))
    )
    client = await Client.connect(
        temporal_env.client.service_client.config.target_host, runtime=runtime
    )
    registry = CollectorRegistry()
    ActivityMetrics(registry)
    ProcessCollector(registry=registry)
    registry.register(SDKMetricsProxy(f"http://127.0.0.1:{port}/metrics"))
    queue = f"dash-{uuid.uuid4()}"
    async with Worker(client, task_queue=queue, workflows=[Hello, Fails], activities=[say]):
        result = await client.execute_workflow(Hello.run, "x", id=queue, task_queue=queue)
        assert result == "hello x"
        with pytest.raises(WorkflowFailureError):
            await client.execute_workflow(
                Fails.run, "on purpose", id=f"{queue}-f", task_queue=queue
            )
        text = await asyncio.to_thread(generate_latest, registry)
        return exported(text.decode())


async def test_every_dashboard_series_is_exported(
    api: httpx.AsyncClient, temporal_env: WorkflowEnvironment
) -> None:
    from_server = exported((await api.get("/metrics")).text)
    available = from_server | await worker_endpoint_series(temporal_env)
    queried = queried_series()
    assert {n.split("_")[0] for n in queried} == {"engram", "process", "temporal"}
    assert queried <= available, sorted(queried - available)


def test_every_panel_names_its_data_source_variable() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    assert len(panels) >= 20
    for panel in panels:
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        assert panel["targets"], panel["title"]
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
