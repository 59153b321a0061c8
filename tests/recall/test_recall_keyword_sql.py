"""The keyword arm's SQL computes exactly engine.bm25.score over what retain stored."""

from __future__ import annotations

import pytest

from engine.bm25 import BM25Params, score
from engine.db import Pool
from engine.recall import keyword
from engine.recall.keyword import keyword_arm
from engine.recall.types import RecallRequest
from engine.text import term_frequencies, tokenize
from recall.recall_support import Banks


async def reference_scores(
    pool: Pool, bank: str, query: str, params: BM25Params
) -> dict[str, float]:
    async with pool.acquire() as conn:
        rows = await conn.fetch("SELECT id::text, text FROM memory_units WHERE bank_id = $1", bank)
    docs = {r["id"]: term_frequencies(r["text"]) for r in rows}
    df: dict[str, int] = {}
    for tf, _ in docs.values():
        for term in tf:
            df[term] = df.get(term, 0) + 1
    avg = sum(length for _, length in docs.values()) / len(docs)
    scores = {
        uid: score(
            tokenize(query), tf, doc_len=length, avg_len=avg, df=df, n_docs=len(docs), params=params
        )
        for uid, (tf, length) in docs.items()
    }
    return {uid: s for uid, s in scores.items() if s > 0}


@pytest.mark.parametrize(
    ("query", "params"),
    [
        ("What does Zelda's brother do for a living?", BM25Params()),
        ("orchid greenhouse orchid seeds", BM25Params()),
        ("brother living baker", BM25Params(k1=1.2, b=0.75)),
    ],
)
async def test_sql_bm25_equals_the_reference(
    recall_pool: Pool, banks: Banks, query: str, params: BM25Params
) -> None:
    pool = recall_pool
    expected = await reference_scores(pool, banks.main, query, params)
    assert len(expected) > 3
    async with pool.acquire() as conn:
        arm = await keyword_arm(
            conn, RecallRequest(banks.main, query), tokenize(query), limit=1000, params=params
        )
    got = {h.unit_id: h.score for h in arm.hits}
    assert got.keys() == expected.keys()
    for uid, value in expected.items():
        assert got[uid] == pytest.approx(value, rel=1e-9)
    assert [h.score for h in arm.hits] == sorted(got.values(), reverse=True)


async def test_sql_bm25_scores_cjk_bigrams(recall_pool: Pool, banks: Banks) -> None:
    pool = recall_pool
    query = "王芳的咖啡店"
    expected = await reference_scores(pool, banks.cjk, query, BM25Params())
    async with pool.acquire() as conn:
        arm = await keyword_arm(
            conn, RecallRequest(banks.cjk, query), tokenize(query), limit=10, params=BM25Params()
        )
    assert len(arm.hits) == 1 and set(expected) == {arm.hits[0].unit_id}
    assert arm.hits[0].score == pytest.approx(expected[arm.hits[0].unit_id], rel=1e-9)


@pytest.mark.parametrize("screen_postings", [1, 10_000])
async def test_screened_bm25_returns_exact_scores(
    recall_pool: Pool, banks: Banks, monkeypatch: pytest.MonkeyPatch, screen_postings: int
) -> None:
    """The large-bank path (a screen over the rarest terms, then exact scoring) returns the
    reference BM25 score for every hit; with every posting screened it returns the same top
    hits as the plain statement."""
    query = "What does Zelda's brother do for a living?"
    params = BM25Params()
    expected = await reference_scores(recall_pool, banks.main, query, params)
    monkeypatch.setattr(keyword, "EXACT_POSTINGS", 0)
    monkeypatch.setattr(keyword, "SCREEN_POSTINGS", screen_postings)
    async with recall_pool.acquire() as conn:
        arm = await keyword_arm(
            conn, RecallRequest(banks.main, query), tokenize(query), limit=5, params=params
        )
    assert arm.note.startswith("screened by")
    assert arm.hits
    for hit in arm.hits:
        assert hit.score == pytest.approx(expected[hit.unit_id], rel=1e-9)
    if screen_postings > 1:
        best = sorted(expected.items(), key=lambda item: (-item[1], item[0]))[:5]
        assert [h.unit_id for h in arm.hits] == [uid for uid, _ in best]
