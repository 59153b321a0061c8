"""Lifecycle activities: begin (operation row, the bank's policy), one batch, finish; and the
retain pipeline's LLM supersession of newly stored facts."""

from __future__ import annotations

from temporalio import activity

from activities.schedules import drop_schedule
from engine.db import Pool
from engine.errors import NotFound
from engine.lifecycle.llm_detect import apply_llm_supersession
from engine.lifecycle.maintenance import run_batch
from engine.lifecycle.payloads import (
    LifecycleBatchRequest,
    LifecycleBatchResult,
    LifecycleDone,
    LifecyclePlan,
    LifecycleStart,
)
from engine.lifecycle.policy import LifecyclePolicy
from engine.lifecycle.schedule import lifecycle_schedule_id
from engine.llm import LLMClient, llm_scope
from engine.retain.payloads import StagedFacts
from engine.store.banks import get_bank
from engine.store.operations import register_operation, update_operation

OPERATION_KIND = "lifecycle"


class LifecycleActivities:
    def __init__(self, pool: Pool, llm: LLMClient | None = None) -> None:
        self._pool = pool
        self._llm = llm

    @activity.defn
    async def supersede_facts(self, facts: StagedFacts) -> int:
        """Ask the model which stored facts each new one replaces (engine/lifecycle/
        llm_detect.py); returns the supersessions applied. Idempotent: a fact already
        superseded is not superseded again. Without an LLM there is nothing to ask (the
        local rules ran in the upsert)."""
        if self._llm is None:
            return 0
        async with self._pool.acquire() as conn:
            with llm_scope(facts.bank_id, "supersession"):
                applied = await apply_llm_supersession(
                    conn, self._llm, facts.bank_id, facts.fact_ids
                )
        return len(applied)

    @activity.defn
    async def begin_lifecycle(self, start: LifecycleStart) -> LifecyclePlan:
        async with self._pool.acquire() as conn:
            try:
                bank = await get_bank(conn, start.bank_id)
            except NotFound:
                await drop_schedule(activity.client(), lifecycle_schedule_id(start.bank_id))
                return LifecyclePlan(False)
            await register_operation(
                conn,
                start.operation_id,
                start.bank_id,
                OPERATION_KIND,
                start.workflow_id,
                f"{OPERATION_KIND}:{start.bank_id}:{start.now.isoformat()}",
            )
            await update_operation(conn, start.operation_id, "running")
        return LifecyclePlan(True, bank.config.lifecycle_policy.to_json())

    @activity.defn
    async def lifecycle_batch(self, batch: LifecycleBatchRequest) -> LifecycleBatchResult:
        policy = LifecyclePolicy(**batch.policy)
        async with self._pool.acquire() as conn:
            counts = await run_batch(
                conn, batch.bank_id, policy, batch.now, batch.after_id, batch.size
            )
            await update_operation(
                conn,
                batch.operation_id,
                "running",
                {"batches": batch.seq + 1, "last_id": counts.last_id, **counts.to_json()},
            )
        return LifecycleBatchResult(
            counts.scanned,
            counts.decayed,
            counts.archived,
            counts.merged,
            counts.deleted,
            counts.last_id,
            counts.observations_retracted,
            list(counts.models),
        )

    @activity.defn
    async def finish_lifecycle(self, done: LifecycleDone) -> None:
        async with self._pool.acquire() as conn:
            await update_operation(
                conn, done.operation_id, done.status, None, dict(done.counts), done.error
            )
            await conn.execute(
                "UPDATE lifecycle_state SET last_run_at = $2, last_operation_id = $3"
                " WHERE bank_id = $1",
                done.bank_id,
                done.now,
                done.operation_id,
            )
