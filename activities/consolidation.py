"""Consolidation activities: each takes one payload and calls one engine step."""

from __future__ import annotations

from concurrent.futures import Executor
from typing import Any

from temporalio import activity

from engine.consolidation.batch import (
    apply_llm_batch,
    consolidate_local_batch,
    forget_batches,
    prepare_llm_batch,
    recorded_batch,
)
from engine.consolidation.candidates import backlog
from engine.consolidation.encode import text_encoder
from engine.consolidation.llm import Proposals, propose
from engine.consolidation.observations import banks_with_work
from engine.consolidation.payloads import (
    BatchRequest,
    BatchResult,
    ConsolidationCounts,
    ConsolidationDone,
    ConsolidationStart,
    SweepRequest,
)
from engine.db import Pool
from engine.embedding import Embedder
from engine.errors import InvalidInput, NotFound
from engine.llm import LLMClient, llm_scope
from engine.store.operations import register_operation, update_operation

# Facts per step. Local: ~10 ms of SQL and regexes per fact, so a step stays well under a
# second and a crash loses little. llm: one model call per scope group, and the prompt grows
# with facts and their related observations; 16 keeps it small.
LOCAL_BATCH_FACTS = 64
LLM_BATCH_FACTS = 16
# From this attempt on the model is bypassed and the batch consolidated by the local path: a
# model that keeps answering unusable JSON, or keeps failing, must not stall the backlog.
LLM_FALLBACK_ATTEMPT = 3


def progress(totals: ConsolidationCounts, backlog_left: int) -> dict[str, int]:
    """The operation's progress: facts done and waiting, and what they did."""
    return {
        "processed": totals.facts,
        "total": totals.facts + backlog_left,
        "backlog": backlog_left,
        **{key: value for key, value in totals.as_dict().items() if key != "facts"},
    }


class ConsolidationActivities:
    def __init__(
        self, pool: Pool, embedder: Embedder, cpu: Executor, llm: LLMClient | None
    ) -> None:
        self._pool = pool
        self._encode = text_encoder(embedder, cpu)
        self._llm = llm

    @activity.defn
    async def begin_consolidation(self, start: ConsolidationStart) -> None:
        async with self._pool.acquire() as conn:
            try:
                await register_operation(
                    conn,
                    start.operation_id,
                    start.bank_id,
                    "consolidation",
                    start.workflow_id,
                    f"consolidation:{start.reason}",
                )
            except NotFound:  # the bank was deleted meanwhile: nothing to record or do
                activity.logger.info("consolidation of deleted bank %s skipped", start.bank_id)
                return
            pending = await backlog(conn, start.bank_id)
            await update_operation(
                conn, start.operation_id, "running", progress(ConsolidationCounts(), pending)
            )

    @activity.defn
    async def consolidate_batch(self, request: BatchRequest) -> BatchResult:
        mode = request.mode
        if mode == "auto":
            mode = "llm" if self._llm is not None else "local"
        if mode == "llm" and activity.info().attempt >= LLM_FALLBACK_ATTEMPT:
            activity.logger.warning(
                "consolidation of %s: the model failed %d times; local path used",
                request.bank_id,
                activity.info().attempt - 1,
            )
            mode = "local"
        if mode == "llm":
            result = await self._llm_batch(request)
        else:
            result = await self._local_batch(request)
        totals = request.done_before.plus(result.counts)
        async with self._pool.acquire() as conn:
            await update_operation(
                conn, request.operation_id, "running", progress(totals, result.backlog)
            )
        return result

    async def _local_batch(self, request: BatchRequest) -> BatchResult:
        async with self._pool.acquire() as conn:
            return await consolidate_local_batch(
                conn,
                request.bank_id,
                request.operation_id,
                request.limit or LOCAL_BATCH_FACTS,
                self._encode,
                request.seq,
                side=self._pool,
            )

    async def _llm_batch(self, request: BatchRequest) -> BatchResult:
        llm = self._llm
        if llm is None:
            raise InvalidInput("mode", "'llm' but no LLM is configured (set ENGRAM_LLM_API_KEY)")
        async with self._pool.acquire() as conn:
            done = await recorded_batch(conn, request.bank_id, request.operation_id, request.seq)
            if done is not None:
                return done  # committed by an attempt that failed afterwards
            batch = await prepare_llm_batch(conn, request.bank_id, request.limit or LLM_BATCH_FACTS)
            if batch is None:
                pending = await backlog(conn, request.bank_id)
                return BatchResult(ConsolidationCounts(), pending, enabled=False, mode="llm")
        proposals: list[Proposals] = []
        for group in batch.groups:  # the model call holds no connection
            with llm_scope(request.bank_id, "consolidation"):
                proposed, _ = await propose(llm, group, batch.mission)
            proposals.append(proposed)
        async with self._pool.acquire() as conn:
            return await apply_llm_batch(
                conn, batch, proposals, request.operation_id, self._encode, request.seq
            )

    @activity.defn
    async def finish_consolidation(self, done: ConsolidationDone) -> None:
        result: dict[str, Any] = {**done.totals.as_dict(), "batches": done.batches}
        async with self._pool.acquire() as conn:
            await update_operation(conn, done.operation_id, done.status, None, result, done.error)
            await forget_batches(conn, done.operation_id)

    @activity.defn
    async def find_consolidation_work(self, sweep: SweepRequest) -> list[str]:
        async with self._pool.acquire() as conn:
            return await banks_with_work(conn, sweep.limit)
