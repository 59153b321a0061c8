"""Recall, orchestrated: analyse → four arms at once → fuse → rerank → score → MMR → budget.

Straight from PostgreSQL, no LLM, no Temporal. Each arm borrows its own pooled connection so
the arms' queries run in parallel on the server; CPU work (query embedding, date parsing,
reranking, MMR) runs in the thread pool, never on the event loop. The keyword arm starts as
soon as the query is tokenised, without waiting for its embedding; the graph arm looks up
the entities the query names as soon as it is embedded and walks from them and the other
arms' seeds once those are in.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import partial
from typing import Any

from engine.bm25 import BM25Params
from engine.db import Pool
from engine.embedding import Embedder
from engine.lifecycle.access import AccessBuffer
from engine.recall.budget import (
    estimate_tokens,
    fill_budget,
    fill_preferring_observations,
    fit_chunks,
)
from engine.recall.candidates import (
    fetch_chunks,
    fetch_evidence,
    fetch_rows,
    source_facts,
    warm_token_cache,
)
from engine.recall.config import RecallConfig
from engine.recall.fusion import fuse_rrf, seeds_of, shortlist
from engine.recall.graph import GraphWalk, graph_work
from engine.recall.graph_cache import GraphCache, graph_cache_for
from engine.recall.graph_memory import BankGraph
from engine.recall.keyword import keyword_arm
from engine.recall.keyword_memory import memory_keyword_arm
from engine.recall.lifecycle import visible_as_of
from engine.recall.query import QueryText, QueryVectors, analyse_text, embed_query
from engine.recall.ranking import rank
from engine.recall.rerank import MaxSimReranker, Reranker, load_reranker
from engine.recall.semantic import semantic_arm
from engine.recall.temporal import pooled_temporal_arm
from engine.recall.token_cache import DEFAULT_CAPACITY_MB, TokenVectorCache
from engine.recall.trace import build_trace
from engine.recall.types import (
    ArmResult,
    BlobCounts,
    CandidateRow,
    ChunkText,
    EntityState,
    Fused,
    Ranked,
    RankingBoosts,
    RecalledMemory,
    RecallRequest,
    RecallResult,
    TimeWindow,
)
from engine.settings import Settings

log = logging.getLogger(__name__)


@dataclass
class _Timer:
    marks: dict[str, float] = field(default_factory=dict)

    def add(self, name: str, started: float) -> None:
        self.marks[name] = round((time.perf_counter() - started) * 1000, 3)


class RecallEngine:
    def __init__(
        self,
        pool: Pool,
        embedder: Embedder,
        cpu: Executor,
        reranker: Reranker | None,
        config: RecallConfig | None = None,
        bm25: BM25Params | None = None,
        token_cache: TokenVectorCache | None = None,
        access: AccessBuffer | None = None,
        graph_cache: GraphCache | None = None,
        scan_session: bool = False,
    ) -> None:
        self._pool = pool
        # The pool's connections start with semantic.SCAN_SESSION (the server's).
        self._scan_session = scan_session
        # Banks' graphs in memory, so the walk sends no statement (None: always SQL).
        self._graph_cache = graph_cache
        self._embedder = embedder
        self._cpu = cpu
        self._reranker = reranker
        self._config = config or RecallConfig()
        self._bm25 = bm25 or BM25Params()
        # Where returned facts are recorded for reinforcement (the server's; None: not kept).
        self._access = access
        self._token_cache = (
            token_cache
            if token_cache is not None
            else TokenVectorCache(DEFAULT_CAPACITY_MB * 2**20)
        )
        # Banks whose token vectors were read into the cache once their graph was held, with
        # the cache's epoch then (a re-embedding's clear makes them due again).
        self._warming: dict[str, tuple[int, asyncio.Task[int]]] = {}

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        pool: Pool,
        embedder: Embedder,
        cpu: Executor,
        access: AccessBuffer | None = None,
        graph_cache: bool = False,
        scan_session: bool = False,
    ) -> RecallEngine:
        """The process's recall engine as configured (the reranker may load a model): the
        server's, and the worker's for reflect's tools. `graph_cache`: keep banks' graphs
        in memory (the server; its owner closes it, `close`). `scan_session`: `pool` was
        opened with semantic.SCAN_SESSION (the server's)."""
        config = RecallConfig(mmr_lambda=settings.recall_mmr_lambda)
        reranker = load_reranker(
            settings.recall_reranker, embedder.dimension, config.context_weight
        )
        cache = TokenVectorCache(settings.recall_token_cache_mb * 2**20)
        graphs = (
            graph_cache_for(config, pool, cpu, settings.recall_graph_cache_mb * 2**20)
            if graph_cache and settings.recall_graph_cache_mb > 0
            else None
        )
        return cls(pool, embedder, cpu, reranker, config, None, cache, access, graphs, scan_session)

    @property
    def config(self) -> RecallConfig:
        return self._config

    @property
    def token_cache(self) -> TokenVectorCache:
        return self._token_cache

    @property
    def graph_cache(self) -> GraphCache | None:
        return self._graph_cache

    async def close(self) -> None:
        """Stop reading banks' graphs and token vectors in the background."""
        tasks = [task for _, task in self._warming.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._graph_cache is not None:
            await self._graph_cache.close()

    def warm(self, bank_id: str) -> asyncio.Task[int]:
        """Read the bank's token vectors into the cache's free room, once per bank and
        cache epoch (in the background; candidates.warm_token_cache): again after a
        re-embedding cleared the cache. The server starts it once the bank's graph is held;
        benches await it."""
        epoch = self._token_cache.epoch
        warming = self._warming.get(bank_id)
        if warming is not None:
            if warming[0] == epoch:
                return warming[1]
            warming[1].cancel()  # it reads for a cache that was cleared meanwhile
        task = asyncio.create_task(
            warm_token_cache(self._pool, self._token_cache, bank_id),
            name=f"engram-warm-{bank_id}",
        )
        self._warming[bank_id] = (epoch, task)
        task.add_done_callback(_log_failure)
        return task

    @property
    def reranker_name(self) -> str:
        return self._reranker.name if self._reranker is not None else "none"

    async def recall(
        self, request: RecallRequest, boosts: Awaitable[RankingBoosts] | None = None
    ) -> RecallResult:
        """`boosts`, when given, replaces `request.boosts` once it is ready (the server reads
        the bank's weights beside the arms)."""
        started = time.perf_counter()
        timer = _Timer()
        reference = request.query_timestamp or datetime.now(UTC)
        loop = asyncio.get_running_loop()
        text_future = loop.run_in_executor(self._cpu, analyse_text, request.query, reference)
        vector_future = loop.run_in_executor(self._cpu, embed_query, self._embedder, request.query)
        async with asyncio.TaskGroup() as group:
            text_task = group.create_task(_timed(text_future, timer, "analyse"))
            vector_task = group.create_task(_timed(vector_future, timer, "embed"))
            # Whether the bank held in memory is still exact: one index probe beside the
            # query's embedding, for the keyword, graph and temporal arms.
            held = group.create_task(self._held(request.bank_id))
            keyword = group.create_task(self._keyword(request, text_task, held))
            semantic = group.create_task(self._semantic(request, vector_task))
            temporal = group.create_task(self._temporal(request, text_task, vector_task, held))
            graph = group.create_task(
                self._graph(request, text_task, vector_task, held, (semantic, keyword, temporal))
            )
        arms = [semantic.result(), keyword.result(), graph.result(), temporal.result()]
        text, vectors = text_task.result(), vector_task.result()
        window = request.temporal_window or text.window
        timer.add("retrieve", started)

        config = self._config
        # The semantic arm is as deaf as MaxSim to words its model does not know: its share
        # of the fusion follows the query's known tokens (1.0 for English; ~0.2 for Chinese
        # under MiniLM, whose arm then mostly adds noise). bench/zh_retrieval.py: 0.797 -> see
        # docs/benchmarks.md.
        understood = vectors.known_share
        weights = {**config.weights, "semantic": config.weights["semantic"] * understood}
        fused = fuse_rrf(arms, k=config.rrf_k, weights=weights, caps=config.caps)
        profile = config.budget(request.budget)
        candidates = shortlist(fused, arms, profile.rerank_depth, config.reserve)
        fetch_started = time.perf_counter()
        reranker = self._reranker
        maxsim = isinstance(reranker, MaxSimReranker)
        neighbours = (
            config.context_neighbours
            if isinstance(reranker, MaxSimReranker) and reranker.wants_context
            else 0
        )
        blobs = BlobCounts()
        rows = await fetch_rows(
            self._pool,
            request.bank_id,
            [f.unit_id for f in candidates],
            token_vectors=maxsim,
            entities=request.include_entities,
            neighbours=neighbours,
            neighbour_chunks=config.context_chunks,
            conversation_gap=config.context_gap,
            conversation_scan=config.context_scan,
            cache=self._token_cache,
            counts=blobs,
            held=held.result(),
            cpu=self._cpu,
        )
        if request.as_of is not None:
            rows = visible_as_of(rows, request.as_of)
        timer.add("fetch", fetch_started)
        by_id = {f.unit_id: f for f in candidates}
        if boosts is not None:
            request = replace(request, boosts=await boosts)
        ranked = await loop.run_in_executor(
            self._cpu,
            self._rank,
            request,
            vectors,
            rows,
            [by_id[r.id] for r in rows],
            reference,
            window,
            text.asks_time,
        )
        timer.marks["rerank"] = round(ranked.rerank_ms, 3)
        kept, used = await self._fill(request, ranked.memories)
        if self._access is not None and request.as_of is None and kept:
            self._access.record(request.bank_id, [m.row.id for m in kept])
        entities = chunks = None
        if kept and (request.include_entities or request.include_chunks):
            extras_started = time.perf_counter()
            entities, chunks = await self._extras(request, kept)
            timer.add("include", extras_started)
        sources = await self._sources(request, kept) if request.include_source_facts else None
        timer.add("total", started)
        trace = (
            build_trace(
                request,
                text,
                window,
                arms,
                fused,
                ranked,
                kept,
                used,
                dict(timer.marks),
                config,
                self.reranker_name,
                blobs,
            )
            if request.trace
            else None
        )
        result = RecallResult(
            kept, entities, chunks, trace, dict(timer.marks), arms, token_vectors=blobs
        )
        if sources is not None:
            ids, facts, truncated = sources
            result = replace(
                result, source_fact_ids=ids, source_facts=facts, source_facts_truncated=truncated
            )
        return result

    async def _keyword(
        self,
        request: RecallRequest,
        text_task: asyncio.Task[QueryText],
        held: asyncio.Task[BankGraph | None],
    ) -> ArmResult:
        """From the bank's cached postings when its graph is fresh (exact BM25 over every
        posting, engine/recall/keyword_memory.py), else the statement."""
        text = await text_task
        profile = self._config.budget(request.budget)
        graph = await held
        if graph is not None:
            arm = partial(
                memory_keyword_arm, graph, request, text.terms, profile.arm_limit, self._bm25
            )
            return await asyncio.get_running_loop().run_in_executor(self._cpu, arm)
        async with self._pool.acquire() as conn:
            return await keyword_arm(
                conn, request, text.terms, limit=profile.arm_limit, params=self._bm25
            )

    async def _semantic(
        self, request: RecallRequest, vector_task: asyncio.Task[QueryVectors]
    ) -> ArmResult:
        vectors = await vector_task
        profile = self._config.budget(request.budget)
        async with self._pool.acquire() as conn:
            return await semantic_arm(
                conn,
                request,
                vectors.vector,
                limit=profile.arm_limit,
                ef_search=profile.ef_search,
                floor=self._config.similarity_floor,
                session=self._scan_session,
            )

    async def _held(self, bank_id: str) -> BankGraph | None:
        """The bank's graph in memory if it is still exact (None: read in SQL); the first
        time one is held, the bank's token vectors are read into the cache too."""
        graph = await self._graph_cache.fresh(bank_id) if self._graph_cache else None
        if graph is not None:
            self.warm(bank_id)
        return graph

    async def _temporal(
        self,
        request: RecallRequest,
        text_task: asyncio.Task[QueryText],
        vector_task: asyncio.Task[QueryVectors],
        held: asyncio.Task[BankGraph | None],
    ) -> ArmResult:
        text = await text_task
        window = request.temporal_window or text.window
        if window is None:
            return ArmResult("temporal", [], 0.0, "no time window in the query")
        vectors = await vector_task
        config, profile = self._config, self._config.budget(request.budget)
        graph = await held
        return await pooled_temporal_arm(
            self._pool,
            (graph, self._cpu) if graph is not None else None,
            request,
            vectors.vector,
            window,
            limit=profile.arm_limit,
            ef_search=profile.ef_search,
            spread_seeds=config.temporal_spread_seeds,
            spread_decay=config.temporal_spread_decay,
            fanout=profile.graph_fanout,
            session=self._scan_session,
        )

    async def _graph(
        self,
        request: RecallRequest,
        text_task: asyncio.Task[QueryText],
        vector_task: asyncio.Task[QueryVectors],
        held: asyncio.Task[BankGraph | None],
        sources: Sequence[asyncio.Task[ArmResult]],
    ) -> ArmResult:
        """The entities the query names are looked up as soon as it is embedded, beside the
        other arms; the walk starts when their seeds are in."""
        config = self._config
        if config.weights.get("graph", 0.0) <= 0:
            return ArmResult("graph", [], 0.0, "weighted 0")
        keys = (await text_task).names
        vectors = await vector_task
        graph = await held
        profile = config.budget(request.budget)
        cached = (graph, self._cpu) if graph is not None else None
        walk = GraphWalk(self._pool, request, vectors.vector, graph_work(config, profile), cached)
        async with asyncio.TaskGroup() as group:
            group.create_task(walk.from_names(keys))
            arms = [await task for task in sources]
            seeds = seeds_of(arms, profile.graph_seeds)
            group.create_task(walk.from_seeds(seeds))
        exclude = {hit.unit_id for arm in arms for hit in arm.hits}
        return walk.result(seeds, exclude, profile.arm_limit)

    def _rank(
        self,
        request: RecallRequest,
        vectors: QueryVectors,
        rows: list[CandidateRow],
        fused: list[Fused],
        reference: datetime,
        window: TimeWindow | None,
        asks_time: bool = False,
    ) -> Ranked:
        """The CPU stage (engine/recall/ranking.py); the ranking benches record around it."""
        return rank(
            self._config,
            self._reranker,
            request,
            vectors,
            rows,
            fused,
            reference,
            window,
            asks_time,
        )

    async def _fill(
        self, request: RecallRequest, memories: list[RecalledMemory]
    ) -> tuple[list[RecalledMemory], int]:
        """The answer within max_tokens, in rank order; with prefer_observations, without
        the raw facts its observations were built from (fill_preferring_observations)."""
        observations = [m.row.id for m in memories if m.row.fact_type == "observation"]
        if not request.prefer_observations or not observations:
            return fill_budget(memories, lambda m: m.tokens, request.max_tokens)
        async with self._pool.acquire() as conn:
            evidence = await fetch_evidence(conn, observations)
        return fill_preferring_observations(
            memories,
            lambda m: m.row.id,
            lambda m: m.row.fact_type == "observation",
            evidence,
            lambda m: m.tokens,
            request.max_tokens,
        )

    async def _sources(
        self, request: RecallRequest, kept: list[RecalledMemory]
    ) -> tuple[dict[str, list[str]], list[CandidateRow], bool]:
        return await source_facts(self._pool, request, kept)

    async def _extras(
        self, request: RecallRequest, kept: list[RecalledMemory]
    ) -> tuple[list[EntityState] | None, list[ChunkText] | None]:
        entities = chunks = None
        if request.include_entities:
            # The rows were read with their entities' names and ids: no query here.
            ids_by_name: dict[str, str] = {}
            for m in kept:
                for name, entity_id in zip(m.row.entities, m.row.entity_ids, strict=True):
                    ids_by_name.setdefault(name, entity_id)
            fitted, _ = fill_budget(list(ids_by_name), estimate_tokens, request.entities_max_tokens)
            entities = [EntityState(ids_by_name[name], name) for name in fitted]
        if request.include_chunks:
            async with self._pool.acquire() as conn:
                ids = list(dict.fromkeys(m.row.chunk_id for m in kept if m.row.chunk_id))
                found = await fetch_chunks(conn, request.bank_id, ids)
            chunks = fit_chunks(
                [(cid, *found[cid]) for cid in ids if cid in found],
                request.chunks_max_tokens,
            )
        return entities, chunks


def _log_failure(task: asyncio.Task[int]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error(
            "warming %s failed: its recalls read token vectors as they come",
            task.get_name(),
            exc_info=task.exception(),
        )


async def _timed(future: asyncio.Future[Any], timer: _Timer, name: str) -> Any:
    started = time.perf_counter()
    result = await future
    timer.add(name, started)
    return result
