"""`python -m worker`: the Temporal worker process (composition root)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, ProcessCollector, start_http_server
from temporalio.client import Client
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig
from temporalio.worker import Interceptor, Worker

from activities.consolidation import ConsolidationActivities
from activities.failures import FailureInterceptor
from activities.imports import ImportActivities
from activities.lifecycle import LifecycleActivities
from activities.mental_models import MentalModelActivities
from activities.pipeline import PipelineActivities
from activities.reembed import ReembedActivities
from activities.reflect import ReflectActivities
from activities.retain import RetainActivities
from activities.transfer import TransferActivities
from activities.webhooks import WebhookActivities
from engine import retokenize
from engine.db import Pool, create_pool, migrate
from engine.embedding import Embedder, load_embedder
from engine.errors import ConfigurationError
from engine.extraction.llm import LLMExtractor
from engine.extraction.local import LocalExtractor
from engine.live_embedder import LiveEmbedder
from engine.llm import LLMClient
from engine.recall.config import RecallConfig
from engine.recall.engine import RecallEngine
from engine.recall.rerank import load_reranker
from engine.reflect.search import ReflectSearch
from engine.settings import Settings
from engine.store.llm_requests import LLMRequestLog
from worker.heartbeat import HeartbeatInterceptor
from worker.metrics import ActivityMetrics, MetricsInterceptor, SDKMetricsProxy
from worker.schedules import ensure_schedules
from workflows.consolidation import ConsolidationSweepWorkflow, ConsolidationWorkflow
from workflows.converter import converter_for
from workflows.imports import ImportWorkflow
from workflows.lifecycle import LifecycleWorkflow
from workflows.mental_models import MentalModelRefreshWorkflow, MentalModelTriggerWorkflow
from workflows.pipeline import DocumentBatchWorkflow
from workflows.policies import EMBED_ACTIVITY, embed_queue
from workflows.reembed import ReembedWorkflow
from workflows.reflect import ReflectWorkflow
from workflows.retain import RetainWorkflow
from workflows.transfer import TransferWorkflow
from workflows.webhooks import WebhookDeliveryWorkflow

log = logging.getLogger("engram.worker")

# CPU-bound steps (ONNX embedding, local extraction) run in this pool. Two threads on this
# 2-core machine: more only queue behind each other and slow the event loop's own work.
CPU_THREADS = 2
# Activities in flight per worker; most of their time is spent waiting on PostgreSQL, the
# CPU pool or an LLM.
MAX_CONCURRENT_ACTIVITIES = 32

WORKFLOWS: Sequence[type] = (
    RetainWorkflow,
    DocumentBatchWorkflow,
    ImportWorkflow,
    ConsolidationWorkflow,
    ConsolidationSweepWorkflow,
    MentalModelRefreshWorkflow,
    MentalModelTriggerWorkflow,
    ReflectWorkflow,
    LifecycleWorkflow,
    WebhookDeliveryWorkflow,
    ReembedWorkflow,
    TransferWorkflow,
)


@dataclass
class WorkerServices:
    pool: Pool
    embedder: Embedder
    cpu: ThreadPoolExecutor
    llm: LLMClient | None
    # Reflect's recall; None: built with the default recall settings (tests).
    recall: RecallEngine | None = None
    model_dir: Path | None = None


def activities_of(services: WorkerServices) -> list[Any]:
    retain = RetainActivities(
        services.pool,
        services.embedder,
        services.cpu,
        LocalExtractor(),
        LLMExtractor(services.llm) if services.llm is not None else None,
        cpu_slots=CPU_THREADS,
    )
    imports = ImportActivities(services.pool)
    pipeline = PipelineActivities(services.pool)
    consolidation = ConsolidationActivities(
        services.pool, services.embedder, services.cpu, services.llm
    )
    mental_models = MentalModelActivities(services.pool, services.embedder, services.cpu)
    recall = services.recall or RecallEngine(
        services.pool,
        services.embedder,
        services.cpu,
        load_reranker("maxsim", services.embedder.dimension, RecallConfig().context_weight),
    )
    reflect = ReflectActivities(
        services.pool,
        ReflectSearch(services.pool, services.embedder, services.cpu, recall),
        services.llm,
    )
    lifecycle = LifecycleActivities(services.pool, services.llm)
    webhooks = WebhookActivities(services.pool)
    reembed = ReembedActivities(services.pool, services.cpu, services.model_dir)
    transfer = TransferActivities(services.pool)
    return [
        reembed.begin_reembed,
        reembed.reembed_batch,
        reembed.index_reembed,
        reembed.switch_reembed,
        reembed.sweep_reembed,
        reembed.abandon_reembed,
        transfer.export_archive,
        transfer.import_archive,
        transfer.end_transfer,
        webhooks.queue_webhook_deliveries,
        webhooks.deliver_webhook,
        webhooks.fail_webhook_delivery,
        lifecycle.begin_lifecycle,
        lifecycle.lifecycle_batch,
        lifecycle.finish_lifecycle,
        lifecycle.supersede_facts,
        pipeline.list_documents,
        pipeline.claim_documents,
        pipeline.plan_documents,
        retain.extract_facts,
        retain.embed_facts,
        retain.resolve_entities,
        retain.link_facts,
        pipeline.upsert_documents,
        pipeline.end_operation,
        retain.update_operation,
        imports.finish_import,
        consolidation.begin_consolidation,
        consolidation.consolidate_batch,
        consolidation.finish_consolidation,
        consolidation.find_consolidation_work,
        mental_models.begin_refresh,
        mental_models.plan_refresh,
        mental_models.store_refresh,
        mental_models.record_refresh_failure,
        mental_models.finish_refresh,
        mental_models.find_models_after_consolidation,
        mental_models.retire_orphan_schedule,
        reflect.load_reflect_context,
        reflect.reflect_turn,
        reflect.run_reflect_tool,
        reflect.gather_reflect_evidence,
        reflect.structure_reflect_answer,
    ]


@asynccontextmanager
async def open_worker_services(
    settings: Settings, embedder: Embedder | None = None
) -> AsyncIterator[WorkerServices]:
    loaded = embedder or load_embedder(settings.embedding_model, settings.model_dir)
    applied = await migrate(settings.database_url, loaded.dimension, loaded.space)
    if retokenize.TERMS_MIGRATION in applied:
        log.warning(retokenize.ADVICE)
    # The write path plans faster than it gains from per-argument plans (engine/db.py).
    pool = await create_pool(
        settings.database_url, max_size=settings.db_pool_max, custom_plans=False
    )
    cpu = ThreadPoolExecutor(CPU_THREADS, thread_name_prefix="engram-cpu")
    llm = LLMClient(settings.llm, LLMRequestLog(pool)) if settings.llm.configured else None
    # Follows a re-embedding (engine/reembed.py): every activity embeds with the model the
    # database's vectors are in.
    live = LiveEmbedder(loaded, settings.model_dir)
    watch = asyncio.create_task(live.watch(pool), name="engram-embedding-watch")
    try:
        recall = RecallEngine.from_settings(settings, pool, live, cpu)
        live.on_swap(recall.token_cache.clear)
        yield WorkerServices(pool, live, cpu, llm, recall, settings.model_dir)
    finally:
        watch.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watch
        if llm is not None:
            await llm.close()
        cpu.shutdown(wait=False, cancel_futures=True)
        await pool.close()


class Workers:
    """What `python -m worker` polls, run together with `async with`: every workflow and
    activity on the task queue, and the embedding step again on a queue of its own
    (`policies.embed_queue`) with as many slots as the CPU pool has threads. Batches
    waiting to embed then wait in Temporal, in the order they asked, instead of filling the
    task queue's activity slots while batches that have embedded wait for a slot to link and
    store (a retain of many requests otherwise finished every batch at about the same time,
    with the CPU idle while they stored)."""

    def __init__(self, main: Worker, embed: Worker) -> None:
        self.main = main
        self.embed = embed

    async def __aenter__(self) -> Workers:
        await self.main.__aenter__()
        try:
            await self.embed.__aenter__()
        except BaseException:
            await self.main.__aexit__(None, None, None)
            raise
        return self

    async def __aexit__(self, *exc: Any) -> None:
        # Both at once: each shutdown waits for its own polls and activities.
        await asyncio.gather(self.main.__aexit__(*exc), self.embed.__aexit__(*exc))


def build_worker(
    client: Client,
    task_queue: str,
    services: WorkerServices,
    interceptor: MetricsInterceptor,
    replacing: Mapping[str, Callable[..., Any]] | None = None,
) -> Workers:
    """The workers `python -m worker` runs. Tests swap single activities (by name) through
    `replacing`, keeping the rest of the wiring, interceptors included."""
    named = {a.__name__: a for a in activities_of(services)} | dict(replacing or {})
    activities = list(named.values())
    interceptors = [interceptor, HeartbeatInterceptor(), FailureInterceptor()]
    # Runs started before the embed queue scheduled their embedding here: it stays served.
    main = Worker(
        client,
        task_queue=task_queue,
        workflows=list(WORKFLOWS),
        activities=activities,
        interceptors=interceptors,
        max_concurrent_activities=MAX_CONCURRENT_ACTIVITIES,
    )
    return Workers(main, embed_worker(client, task_queue, named[EMBED_ACTIVITY], interceptors))


def embed_worker(
    client: Client,
    task_queue: str,
    embed_facts: Callable[..., Any],
    interceptors: Sequence[Interceptor] = (),
) -> Worker:
    """The poller of the embedding step's own queue (see `Workers`)."""
    return Worker(
        client,
        task_queue=embed_queue(task_queue),
        activities=[embed_facts],
        interceptors=interceptors,
        max_concurrent_activities=CPU_THREADS,
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def run(settings: Settings) -> None:
    registry = CollectorRegistry()
    interceptor = MetricsInterceptor(ActivityMetrics(registry))
    ProcessCollector(registry=registry)
    sdk_port = _free_port()
    runtime = Runtime(
        telemetry=TelemetryConfig(metrics=PrometheusConfig(bind_address=f"127.0.0.1:{sdk_port}"))
    )
    registry.register(SDKMetricsProxy(f"http://127.0.0.1:{sdk_port}/metrics"))
    start_http_server(
        settings.worker_metrics_port, addr=settings.worker_metrics_host, registry=registry
    )
    client = await Client.connect(
        settings.resolved_temporal_address,
        namespace=settings.temporal_namespace,
        data_converter=converter_for(settings),
        runtime=runtime,
    )
    async with open_worker_services(settings) as services:
        await ensure_schedules(client, settings.task_queue)
        worker = build_worker(client, settings.task_queue, services, interceptor)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        async with worker:
            log.info("worker polling task queue %s", settings.task_queue)
            await stop.wait()
        log.info("worker stopped")


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s worker %(levelname)s %(message)s")
    try:
        settings = Settings.from_env()
        if not settings.database_url:
            raise ConfigurationError("ENGRAM_DATABASE_URL is not set")
        asyncio.run(run(settings))
    except ConfigurationError as exc:
        print(f"engram worker: {exc}", file=sys.stderr)
        return 2
    return 0
