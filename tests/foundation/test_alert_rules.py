"""deploy/alerts.yml only names series that Engram exposes."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

import httpx
from prometheus_client import CollectorRegistry
from prometheus_client.core import Metric
from prometheus_client.parser import text_string_to_metric_families

from worker.metrics import ActivityMetrics

ROOT = Path(__file__).resolve().parents[2]
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}


def series_names(families: Iterable[Metric]) -> set[str]:
    """Every series a family can have, observed yet or not (labelled ones start empty)."""
    return {
        family.name + suffix for family in families for suffix in SUFFIXES.get(family.type, ("",))
    }


async def test_alert_rules_name_only_exposed_series(api: httpx.AsyncClient) -> None:
    rules = (ROOT / "deploy" / "alerts.yml").read_text()
    expressions = [line for line in rules.splitlines() if not line.lstrip().startswith("#")]
    named = {m for line in expressions for m in re.findall(r"\bengram_\w+", line)}
    registry = CollectorRegistry()
    ActivityMetrics(registry)
    text = (await api.get("/metrics")).text
    exposed = series_names(registry.collect()) | series_names(text_string_to_metric_families(text))
    assert len(named) >= 5 and named <= exposed, named - exposed
