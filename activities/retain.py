"""Retain activities: each takes one payload and calls one engine step."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor

from temporalio import activity

from engine.db import Pool
from engine.embedding import Embedder
from engine.errors import InvalidInput
from engine.extraction.llm import LLMExtractor
from engine.extraction.local import LocalExtractor
from engine.llm import llm_scope
from engine.retain.documents import load_chunks
from engine.retain.gate import OrderedGate
from engine.retain.known_names import known_han_names
from engine.retain.links import link_staged
from engine.retain.payloads import (
    ChunkJob,
    ExtractionBatch,
    ExtractionJob,
    LinkOptions,
    OperationUpdate,
    StagedFacts,
)
from engine.retain.resolve import resolve_staged_entities
from engine.retain.staging import chunk_as_fact, embed_staged, stage_extracted
from engine.store.operations import update_operation
from engine.types import ExtractedFact, ItemContext


class RetainActivities:
    def __init__(
        self,
        pool: Pool,
        embedder: Embedder,
        cpu: Executor,
        local: LocalExtractor,
        llm: LLMExtractor | None,
        cpu_slots: int = 2,
    ) -> None:
        self._pool = pool
        self._embedder = embedder
        self._cpu = cpu
        self._local = local
        self._llm = llm
        # One model run per CPU thread at a time, the rest wait in document order.
        self._gate = OrderedGate(cpu_slots)

    @activity.defn
    async def extract_facts(self, job: ExtractionJob) -> StagedFacts:
        """Extract the planned chunks the job names (loaded from staging) and stage facts."""
        async with self._pool.acquire() as conn:
            known = frozenset[str]()
            if job.extraction_mode == "local":
                known = await known_han_names(conn, job.bank_id)
            extract = self._extractor(job.extraction_mode, known)
            chunks = await load_chunks(conn, job.operation_id, job.slices)
            batch = ExtractionBatch(
                job.operation_id, job.extraction_mode, chunks, job.retain_mission
            )
            return await stage_extracted(conn, batch, extract)

    def _extractor(self, mode: str, known: frozenset[str] = frozenset()) -> ChunkExtractorFn:
        if mode == "none":
            return _none_extract
        if mode == "llm":
            llm = self._llm
            if llm is None:
                raise InvalidInput(
                    "extraction_mode", "'llm' but no LLM is configured (set ENGRAM_LLM_API_KEY)"
                )

            async def llm_extract(chunk: ChunkJob, item: ItemContext) -> list[ExtractedFact]:
                with llm_scope(chunk.bank_id, "retain"):
                    return await llm.extract(chunk.text, item)

            return llm_extract
        local = self._local.with_known_names(known) if known else self._local
        cpu = self._cpu

        async def local_extract(chunk: ChunkJob, item: ItemContext) -> list[ExtractedFact]:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(cpu, local.extract, chunk.text, item)

        return local_extract

    @activity.defn
    async def embed_facts(self, staged: StagedFacts) -> int:
        return await embed_staged(self._pool, self._embedder, self._cpu, staged, self._gate)

    @activity.defn
    async def resolve_entities(self, staged: StagedFacts) -> int:
        async with self._pool.acquire() as conn, conn.transaction():
            return await resolve_staged_entities(conn, staged)

    @activity.defn
    async def link_facts(self, options: LinkOptions) -> int:
        return await link_staged(self._pool, self._cpu, options)

    @activity.defn
    async def update_operation(self, update: OperationUpdate) -> None:
        async with self._pool.acquire() as conn:
            await update_operation(
                conn,
                update.operation_id,
                update.status,
                dict(update.progress),
                dict(update.result) if update.result is not None else None,
                update.error,
            )


async def _none_extract(chunk: ChunkJob, item: ItemContext) -> list[ExtractedFact]:
    return [chunk_as_fact(chunk)]


ChunkExtractorFn = Callable[[ChunkJob, ItemContext], Awaitable[list[ExtractedFact]]]
