"""The keyword arm from a cached bank's postings (engine/recall/keyword_memory.py): the SQL
arm's hits and scores under every filter, exact BM25 at every size, and never served after a
write changed the bank."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from engine.bm25 import BM25Params
from engine.db import Pool
from engine.embedding import Embedder
from engine.lifecycle.supersession import Supersession, supersede
from engine.recall.config import RecallConfig
from engine.recall.engine import RecallEngine
from engine.recall.graph_cache import graph_cache_for
from engine.recall.graph_memory import BankGraph
from engine.recall.keyword import keyword_arm
from engine.recall.keyword_memory import memory_keyword_arm
from engine.recall.types import ArmResult, RecallRequest
from engine.store.memories import TagsMatch
from engine.text import tokenize
from recall.recall_support import BASE, Banks
from recall.test_recall_keyword_sql import reference_scores

QUERIES = (
    "What does Zelda's brother do for a living?",
    "orchid greenhouse orchid seeds",
    "Priya visited",
    "王芳的咖啡店",
    "Was Alice affected by recent issues on the cluster?",
    "Sam bought",
)


async def _both(
    pool: Pool, graph: BankGraph, request: RecallRequest, limit: int, params: BM25Params
) -> tuple[ArmResult, ArmResult]:
    terms = tokenize(request.query)
    async with pool.acquire() as conn:
        sql = await keyword_arm(conn, request, terms, limit=limit, params=params)
    return sql, memory_keyword_arm(graph, request, terms, limit, params)


def _same(sql: ArmResult, mem: ArmResult) -> None:
    assert [h.unit_id for h in mem.hits] == [h.unit_id for h in sql.hits]
    for got, expected in zip(mem.hits, sql.hits, strict=True):
        assert got.score == pytest.approx(expected.score, rel=1e-9)


async def test_the_memory_arm_returns_the_sql_arms_hits_under_every_filter(
    recall_pool: Pool, cpu: ThreadPoolExecutor, banks: Banks
) -> None:
    cache = graph_cache_for(RecallConfig(), recall_pool, cpu, 64 * 2**20)
    modes: tuple[TagsMatch, ...] = ("any", "all", "any_strict", "all_strict", "exact")
    compared = 0
    for bank in (banks.main, banks.cjk, banks.depth, banks.by_message):
        graph = await cache.read(bank)
        assert graph is not None and graph.postings.nbytes > 0
        for query in QUERIES:
            requests = [
                RecallRequest(bank, query),
                RecallRequest(bank, query, types=("world",)),
                RecallRequest(bank, query, types=("experience", "observation")),
                RecallRequest(bank, query, as_of=datetime(2024, 6, 1, tzinfo=UTC)),
            ]
            requests += [
                RecallRequest(bank, query, tags=tags, tags_match=mode)
                for mode in modes
                for tags in (("alpha",), ("alpha", "beta"))
            ]
            for request in requests:
                for limit, params in ((60, BM25Params()), (3, BM25Params(k1=1.2, b=0.75))):
                    sql, mem = await _both(recall_pool, graph, request, limit, params)
                    _same(sql, mem)
                    compared += len(sql.hits)
    assert compared > 300  # the queries matched facts to compare

    # Above EXACT_POSTINGS the statement screens; the memory arm is exact BM25 at any size.
    query = "What does Zelda's brother do for a living?"
    expected = await reference_scores(recall_pool, banks.main, query, BM25Params())
    graph = await cache.read(banks.main)
    assert graph is not None
    mem = memory_keyword_arm(
        graph, RecallRequest(banks.main, query), tokenize(query), 5000, BM25Params()
    )
    assert {h.unit_id for h in mem.hits} == expected.keys()
    for hit in mem.hits:
        assert hit.score == pytest.approx(expected[hit.unit_id], rel=1e-9)
    await cache.close()


async def _keyword(engine: RecallEngine, request: RecallRequest) -> ArmResult:
    result = await engine.recall(request)
    (arm,) = [a for a in result.arms if a.arm == "keyword"]
    return arm


async def test_a_write_sends_the_keyword_arm_to_sql_until_the_bank_is_read_again(
    api: httpx.AsyncClient,
    pool: Pool,
    embedder: Embedder,
    cpu: ThreadPoolExecutor,
    bank_id: str,
) -> None:
    cache = graph_cache_for(RecallConfig(), pool, cpu, 64 * 2**20)
    engine = RecallEngine(pool, embedder, cpu, None, graph_cache=cache)

    async def retain(document: str, content: str) -> str:
        response = await api.post(
            f"{BASE}/{bank_id}/memories",
            json={"items": [{"document_id": document, "content": content}]},
        )
        assert response.status_code == 200, response.text
        listed = await api.get(f"{BASE}/{bank_id}/memories/list", params={"limit": "100"})
        return str({i["document_id"]: i["id"] for i in listed.json()["items"]}[document])

    async def arm(query: str, cached: bool, **options: object) -> list[str]:
        request = RecallRequest(bank_id, query, **options)  # type: ignore[arg-type]
        found = await _keyword(engine, request)
        assert found.note.startswith("from memory") == cached, found.note
        return [h.unit_id for h in found.hits]

    first = await retain("a", "Ivo keeps the lighthouse in Porto.")
    assert await cache.read(bank_id) is not None
    assert await arm("lighthouse", cached=True) == [first]
    # Holding the bank's graph started reading its token vectors into the cache, once.
    warming = engine.warm(bank_id)
    assert await warming == 1 and first in engine.token_cache
    assert engine.warm(bank_id) is warming
    # A re-embedding clears the cache: the next warm of the bank reads its blobs again.
    engine.token_cache.clear()
    rewarming = engine.warm(bank_id)
    assert rewarming is not warming and await rewarming == 1 and first in engine.token_cache

    # A retain: the next recall scores in SQL (and sees the new fact), then memory again.
    second = await retain("b", "Ivo painted the lighthouse red.")
    assert set(await arm("lighthouse", cached=False)) == {first, second}
    assert await cache.read(bank_id) is not None
    assert set(await arm("lighthouse", cached=True)) == {first, second}

    # A lifecycle change, then the states each request sees, as the statement does.
    async with pool.acquire() as conn, conn.transaction():
        assert await supersede(conn, bank_id, Supersession(first, second, "test"))
    assert await arm("lighthouse", cached=False) == [second]
    graph = await cache.read(bank_id)
    assert graph is not None
    assert await arm("lighthouse", cached=True) == [second]
    later = datetime.now(UTC) + timedelta(days=1)
    for request in (
        RecallRequest(bank_id, "Ivo lighthouse", include_superseded=True),
        RecallRequest(bank_id, "Ivo lighthouse", as_of=later),
    ):
        sql, mem = await _both(pool, graph, request, 60, BM25Params())
        assert {h.unit_id for h in mem.hits} == {first, second}
        _same(sql, mem)

    # Erasure: the deleted fact is gone from the next recall, in SQL and then from memory.
    deleted = await api.delete(f"{BASE}/{bank_id}/memories/{second}")
    assert deleted.status_code == 200, deleted.text
    assert await arm("lighthouse", cached=False) == []
    assert await cache.read(bank_id) is not None
    assert await arm("lighthouse", cached=True) == []
    assert await arm("lighthouse", cached=True, include_superseded=True) == [first]
    await engine.close()
