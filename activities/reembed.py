"""Re-embedding activities: each step of engine/reembed.py, with the target model loaded once
per worker process (by the name the run records)."""

from __future__ import annotations

import asyncio
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path

from temporalio import activity

from engine import reembed
from engine.db import Pool
from engine.embedding import Embedder, load_embedder


@dataclass(frozen=True)
class ReembedStart:
    model: str


@dataclass(frozen=True)
class ReembedStep:
    run_id: str
    model: str
    batch_size: int = reembed.BATCH_SIZE
    after_id: str | None = None


@dataclass(frozen=True)
class ReembedProgress:
    embedded: int
    remaining: int


class ReembedActivities:
    def __init__(self, pool: Pool, cpu: Executor, model_dir: Path | None = None) -> None:
        self._pool = pool
        self._cpu = cpu
        self._model_dir = model_dir
        self._models: dict[str, Embedder] = {}

    async def _model(self, name: str) -> Embedder:
        if name not in self._models:
            loop = asyncio.get_running_loop()
            self._models[name] = await loop.run_in_executor(
                self._cpu, load_embedder, name, self._model_dir
            )
        return self._models[name]

    @activity.defn
    async def begin_reembed(self, start: ReembedStart) -> str:
        run = await reembed.begin(self._pool, start.model, await self._model(start.model))
        return run.id

    @activity.defn
    async def reembed_batch(self, step: ReembedStep) -> ReembedProgress:
        embedder = await self._model(step.model)
        embedded, remaining = await reembed.fill_batch(
            self._pool, step.run_id, embedder, self._cpu, step.batch_size
        )
        return ReembedProgress(embedded, remaining)

    @activity.defn
    async def index_reembed(self, step: ReembedStep) -> None:
        await reembed.build_index(self._pool)

    @activity.defn
    async def switch_reembed(self, step: ReembedStep) -> None:
        await reembed.switch(self._pool, step.run_id, await self._model(step.model), self._cpu)

    @activity.defn
    async def sweep_reembed(self, step: ReembedStep) -> str | None:
        embedder = await self._model(step.model)
        return await reembed.sweep(self._pool, step.run_id, embedder, self._cpu, step.after_id)

    @activity.defn
    async def abandon_reembed(self, step: ReembedStep) -> None:
        await reembed.abandon(self._pool, step.run_id, "cancelled")
