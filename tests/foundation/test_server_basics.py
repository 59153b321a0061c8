"""Health, readiness, version and the server's Prometheus endpoint."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families


async def test_health_and_ready(api: httpx.AsyncClient) -> None:
    assert (await api.get("/health")).json() == {"status": "healthy"}
    ready = await api.get("/ready")
    assert ready.status_code == 200
    assert ready.json()["checks"] == {"database": "ok", "temporal": "ok"}
    live = (await api.get("/health/live")).json()
    assert live["status"] == "alive" and live["uptime_seconds"] >= 0


async def test_version_lists_every_feature_flag(api: httpx.AsyncClient) -> None:
    features = (await api.get("/version")).json()["features"]
    assert len(features) == 11 and all(isinstance(v, bool) for v in features.values())


async def test_metrics_use_route_templates_so_labels_stay_bounded(api: httpx.AsyncClient) -> None:
    for bank in ("a", "b", "c"):
        await api.get(f"/v1/default/banks/{bank}/profile")
    await api.get("/no/such/route/1")
    await api.get("/no/such/route/2")
    text = (await api.get("/metrics")).text
    samples = [
        s
        for family in text_string_to_metric_families(text)
        if family.name == "engram_http_requests"
        for s in family.samples
        if s.name == "engram_http_requests_total"
    ]
    profile = [s for s in samples if s.labels["route"] == "/v1/default/banks/{bank_id}/profile"]
    assert len(profile) == 1 and profile[0].value == 3 and profile[0].labels["status"] == "404"
    unmatched = [s for s in samples if s.labels["route"] == "unmatched"]
    assert len(unmatched) == 1 and unmatched[0].value == 2
    assert "engram_http_request_duration_seconds_bucket" in text
    assert "engram_http_requests_in_flight" in text
    assert "engram_db_pool_size" in text


def _gauges(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


async def test_metrics_report_memory_size_and_waiting_work(
    api: httpx.AsyncClient, bank_id: str
) -> None:
    before = _gauges((await api.get("/metrics")).text)
    body = {"items": [{"content": "Ivo repaired the boat. Zelda sailed it to Split."}]}
    response = await api.post(f"/v1/default/banks/{bank_id}/memories", json=body)
    assert response.status_code == 200, response.text
    facts = (await api.get(f"/v1/default/banks/{bank_id}/memories/list")).json()["items"]
    stored = [f for f in facts if f["fact_type"] != "observation"]
    after = _gauges((await api.get("/metrics")).text)

    def facts_in(g: dict[tuple[str, tuple[tuple[str, str], ...]], float]) -> float:
        return sum(
            g.get(("engram_memory_units", (("type", t),)), 0) for t in ("world", "experience")
        )

    assert after[("engram_memory_status_up", ())] == 1
    assert stored and facts_in(after) - facts_in(before) == len(stored)
    assert after[("engram_banks", ())] >= 1
    assert ("engram_consolidation_backlog_facts", ()) in after
    done = ("engram_operations", (("kind", "retain"), ("status", "completed")))
    assert after[done] - before.get(done, 0) == 1
