"""Prometheus series for recall, on the app's registry (no globals)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

from engine.recall.types import RecallResult

ARM_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)
RESULT_BUCKETS = (0, 1, 2, 5, 10, 20, 50, 100, 200)


class RecallMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.arm_latency = Histogram(
            "engram_recall_arm_duration_seconds",
            "Time each recall arm took (semantic, keyword, graph, temporal).",
            ["arm"],
            buckets=ARM_BUCKETS,
            registry=registry,
        )
        self.stage_latency = Histogram(
            "engram_recall_stage_duration_seconds",
            "Time of recall's stages (embed, retrieve, fetch, rerank, total).",
            ["stage"],
            buckets=ARM_BUCKETS,
            registry=registry,
        )
        self.results = Histogram(
            "engram_recall_results",
            "Memories returned per recall.",
            buckets=RESULT_BUCKETS,
            registry=registry,
        )
        self.recalls = Counter(
            "engram_recalls_total", "Recalls served, by budget.", ["budget"], registry=registry
        )
        self.token_vectors = Counter(
            "engram_recall_token_vectors_total",
            "Token-vector blobs the rerank used, by source: the process's cache or the database.",
            ["source"],
            registry=registry,
        )

    def observe(self, budget: str, result: RecallResult) -> None:
        self.recalls.labels(budget).inc()
        self.results.observe(len(result.memories))
        for arm in result.arms:
            if arm.hits or arm.elapsed_ms > 0:
                self.arm_latency.labels(arm.arm).observe(arm.elapsed_ms / 1000)
        for stage, ms in result.timings_ms.items():
            self.stage_latency.labels(stage).observe(ms / 1000)
        if result.token_vectors is not None:
            self.token_vectors.labels("cache").inc(result.token_vectors.cached)
            self.token_vectors.labels("database").inc(result.token_vectors.read)
