"""What the HTTP server talks to, opened once per process by the lifespan."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from temporalio.client import Client

from engine.db import Pool, create_pool, migrate
from engine.embedding import Embedder, load_embedder
from engine.lifecycle.access import AccessBuffer
from engine.live_embedder import LiveEmbedder
from engine.recall.engine import RecallEngine
from engine.recall.graph_cache import ChangePruner
from engine.recall.semantic import SCAN_SESSION
from engine.settings import Settings
from workflows.converter import converter_for

# Recall's CPU work (query embedding, date parsing) runs here, off the event loop. Two threads
# on this 2-core machine: onnxruntime runs one intra-op thread per call.
CPU_THREADS = 2


@dataclass
class Services:
    settings: Settings
    pool: Pool
    temporal: Client
    embedder: Embedder
    cpu: ThreadPoolExecutor
    # Keep banks' graphs in memory (engine/recall/graph_cache.py): the server's processes do
    # (`open_services`, which closes it); services built by hand (tests) walk in SQL.
    graph_cache: bool = False
    # The pool's connections start with recall's scan settings (`open_services` opens it so).
    scan_session: bool = False
    # Built with the services, not on the first request, so no recall pays for it.
    recall: RecallEngine = field(init=False)
    # The facts recall returned, flushed as reinforcement by `open_services`' task.
    access: AccessBuffer = field(init=False)

    def __post_init__(self) -> None:
        self.access = AccessBuffer(self.pool)
        self.recall = RecallEngine.from_settings(
            self.settings,
            self.pool,
            self.embedder,
            self.cpu,
            access=self.access,
            graph_cache=self.graph_cache,
            scan_session=self.scan_session,
        )


@asynccontextmanager
async def open_services(settings: Settings) -> AsyncIterator[Services]:
    loaded = load_embedder(settings.embedding_model, settings.model_dir)
    await migrate(settings.database_url, loaded.dimension, loaded.space)
    # Follows a re-embedding (engine/reembed.py): recall embeds queries with the model the
    # database's vectors are in, within FOLLOW_INTERVAL of the switch.
    embedder = LiveEmbedder(loaded, settings.model_dir)
    pool = await create_pool(
        settings.database_url, max_size=settings.db_pool_max, settings=SCAN_SESSION
    )
    cpu = ThreadPoolExecutor(CPU_THREADS, thread_name_prefix="engram-cpu")
    try:
        temporal = await Client.connect(
            settings.resolved_temporal_address,
            namespace=settings.temporal_namespace,
            data_converter=converter_for(settings),
        )
        services = Services(
            settings, pool, temporal, embedder, cpu, graph_cache=True, scan_session=True
        )
        embedder.on_swap(services.recall.token_cache.clear)
        if services.recall.graph_cache is not None:
            embedder.on_swap(services.recall.graph_cache.clear)
        tasks = [
            asyncio.create_task(services.access.run(), name="engram-access-flush"),
            asyncio.create_task(embedder.watch(pool), name="engram-embedding-watch"),
            # Whether or not this process keeps graphs, another may: the table stays small.
            asyncio.create_task(ChangePruner(pool).run(), name="engram-bank-changes-prune"),
        ]
        try:
            yield services
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            await services.recall.close()
    finally:
        cpu.shutdown(wait=False, cancel_futures=True)
        await pool.close()
