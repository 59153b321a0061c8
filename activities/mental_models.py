"""Mental-model refresh activities: each takes one payload and calls one engine step."""

from __future__ import annotations

import asyncio
from concurrent.futures import Executor

import numpy as np
from numpy.typing import NDArray
from temporalio import activity

from activities.schedules import drop_schedule
from engine.db import Pool
from engine.embedding import Embedder
from engine.mental_models.payloads import (
    BeginRefresh,
    ConsolidatedBank,
    FailureRecord,
    FinishRefresh,
    PlanRequest,
    RefreshPlan,
    StoreRequest,
    TriggerRequest,
)
from engine.mental_models.refresh import plan_refresh, record_failure, store_refresh
from engine.mental_models.store import find_model, models_refreshed_after_consolidation
from engine.mental_models.trigger import schedule_id_for
from engine.recall.engine import RecallEngine
from engine.store.operations import register_operation, update_operation

OPERATION_KIND = "refresh_mental_model"


def refresh_request_hash(bank_id: str, model_id: str) -> str:
    return f"{OPERATION_KIND}:{bank_id}:{model_id}"


class MentalModelActivities:
    def __init__(self, pool: Pool, embedder: Embedder, cpu: Executor) -> None:
        self._pool = pool
        self._embedder = embedder
        self._cpu = cpu
        # No reranker: the digest needs the set recall finds, not its finest order.
        self._recall = RecallEngine(pool, embedder, cpu, None)

    async def _embed(self, text: str) -> NDArray[np.float32]:
        loop = asyncio.get_running_loop()
        vectors = await loop.run_in_executor(self._cpu, self._embedder.embed, [text])
        return np.asarray(vectors[0], dtype=np.float32)

    @activity.defn
    async def begin_refresh(self, begin: BeginRefresh) -> None:
        async with self._pool.acquire() as conn:
            for operation_id in begin.operation_ids:
                await register_operation(
                    conn,
                    operation_id,
                    begin.bank_id,
                    OPERATION_KIND,
                    begin.workflow_id,
                    refresh_request_hash(begin.bank_id, begin.model_id),
                )
                await update_operation(conn, operation_id, "running")

    @activity.defn
    async def plan_refresh(self, request: PlanRequest) -> RefreshPlan:
        return await plan_refresh(self._pool, self._recall, request)

    @activity.defn
    async def store_refresh(self, request: StoreRequest) -> int:
        return await store_refresh(self._pool, self._embed, request)

    @activity.defn
    async def record_refresh_failure(self, failure: FailureRecord) -> None:
        await record_failure(
            self._pool, failure.bank_id, failure.model_id, failure.error, failure.failed_at
        )

    @activity.defn
    async def finish_refresh(self, done: FinishRefresh) -> None:
        async with self._pool.acquire() as conn:
            for operation_id in done.operation_ids:
                await update_operation(
                    conn, operation_id, done.status, None, done.result, done.error
                )

    @activity.defn
    async def find_models_after_consolidation(self, bank: ConsolidatedBank) -> list[str]:
        async with self._pool.acquire() as conn:
            return await models_refreshed_after_consolidation(conn, bank.bank_id)

    @activity.defn
    async def retire_orphan_schedule(self, trigger: TriggerRequest) -> bool:
        """True when the model is gone (e.g. its bank was deleted) and its schedule with it."""
        async with self._pool.acquire() as conn:
            if await find_model(conn, trigger.bank_id, trigger.model_id) is not None:
                return False
        client = activity.client()
        for kind in ("model", "report"):
            schedule_id = schedule_id_for(trigger.bank_id, trigger.model_id, kind)
            await drop_schedule(client, schedule_id)
        activity.logger.info(
            "mental model %s/%s is gone: its schedule was deleted",
            trigger.bank_id,
            trigger.model_id,
        )
        return True
