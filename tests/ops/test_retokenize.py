"""`engram retokenize`: a bank whose Chinese was indexed as character bigrams (before the word
segmentation, migration 0024 marks it version 0) gets today's postings, exact BM25
statistics, and recall finds what the old postings could not."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from prometheus_client import CollectorRegistry
from recall.recall_support import BASE, recall_app
from temporalio.testing import WorkflowEnvironment

from engine.db import Pool, create_pool, migrate
from engine.embedding import Embedder
from engine.text import TERMS_VERSION, term_frequencies, tokenize, tokenize_with
from engram import cli
from engram.postgres import EmbeddedPostgres
from worker.main import WorkerServices, build_worker
from worker.metrics import ActivityMetrics, MetricsInterceptor

NOTES = [
    "团子是我家的猫，最近胖了一斤。",
    "小林负责开源栏目，写稿前先在沙箱里跑通。",
    "陈默上周把博客从 WordPress 迁到了 Hugo。",
    "Anna adopted a dog named Rex in March.",
]
# Every term today's tokeniser makes of it is a single character or a word the bigram
# postings lack (哪只 猫 胖 了 ...): the old index has nothing to match.
QUERY = "哪只猫胖了"

# What a database written before migration 0024 holds: Chinese as overlapping bigrams.
_OLD_TERMS = """
INSERT INTO memory_terms (bank_id, term, unit_id, tf)
SELECT $2, t.term, $1::uuid, t.tf FROM unnest($3::text[], $4::int[]) AS t(term, tf)
"""
_STATS_AS_RECOUNTED = """
SELECT (SELECT total_terms FROM bank_stats WHERE bank_id = $1)
         = (SELECT sum(token_count) FROM memory_units WHERE bank_id = $1)
   AND NOT EXISTS (
       SELECT term, df FROM bank_term_stats WHERE bank_id = $1 AND df > 0
       EXCEPT
       SELECT term, count(*) FROM memory_terms WHERE bank_id = $1 GROUP BY term)
   AND NOT EXISTS (
       SELECT term, count(*) FROM memory_terms WHERE bank_id = $1 GROUP BY term
       EXCEPT
       SELECT term, df FROM bank_term_stats WHERE bank_id = $1)
"""


@pytest.fixture(scope="module")
async def retokenize_db(
    postgres: EmbeddedPostgres, embedder: Embedder
) -> AsyncIterator[tuple[str, Pool]]:
    dsn = postgres.create_database("t_retokenize")
    await migrate(dsn, embedder.dimension, embedder.space)
    pool = await create_pool(dsn, max_size=4)
    yield dsn, pool
    await pool.close()


async def test_retokenize_gives_an_old_bank_the_new_postings(
    tmp_path: Path,
    temporal_env: WorkflowEnvironment,
    retokenize_db: tuple[str, Pool],
    embedder: Embedder,
    cpu: ThreadPoolExecutor,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    dsn, pool = retokenize_db
    application = recall_app(tmp_path, pool, temporal_env, embedder, cpu)
    running = build_worker(
        temporal_env.client,
        application.state.services.settings.task_queue,
        WorkerServices(pool, embedder, cpu, None),
        MetricsInterceptor(ActivityMetrics(CollectorRegistry())),
    )
    bank = f"retok-{uuid.uuid4().hex[:8]}"
    transport = httpx.ASGITransport(app=application)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        async with running:
            items = [{"content": n, "timestamp": "2026-10-02T10:00:00Z"} for n in NOTES]
            response = await client.post(f"{BASE}/{bank}/memories", json={"items": items})
            assert response.status_code == 200, response.text

        # The bank as an older Engram left it: bigram postings, version 0, statistics to match.
        async with pool.acquire() as conn, conn.transaction():
            for row in await conn.fetch(
                "SELECT id::text, text, token_count FROM memory_units WHERE bank_id = $1", bank
            ):
                old = Counter(tokenize_with(str(row["text"]), "bigrams"))
                await conn.execute("DELETE FROM memory_terms WHERE unit_id = $1::uuid", row["id"])
                await conn.execute(_OLD_TERMS, row["id"], bank, list(old), list(old.values()))
                await conn.execute(
                    "UPDATE memory_units SET token_count = $2, terms_version = 0 WHERE id = $1",
                    uuid.UUID(row["id"]),
                    old.total(),
                )
                await conn.execute(
                    "UPDATE bank_stats SET total_terms = total_terms + $2 WHERE bank_id = $1",
                    bank,
                    old.total() - int(row["token_count"]),
                )
            await conn.execute("DELETE FROM bank_term_stats WHERE df <= 0")
            stored = {
                str(r["term"])
                for r in await conn.fetch(
                    "SELECT DISTINCT term FROM memory_terms WHERE bank_id = $1", bank
                )
            }
            assert await conn.fetchval(_STATS_AS_RECOUNTED, bank)
            memories = await conn.fetchval(
                "SELECT count(*) FROM memory_units WHERE bank_id = $1", bank
            )
        assert not stored & set(tokenize(QUERY))

        monkeypatch.setenv("ENGRAM_DATABASE_URL", dsn)
        assert await asyncio.to_thread(cli.main, ["retokenize", "--bank", bank]) == 0
        assert f"done: {memories:,} memories checked" in capsys.readouterr().out

        async with pool.acquire() as conn:
            assert await conn.fetchval(_STATS_AS_RECOUNTED, bank)
            for row in await conn.fetch(
                "SELECT id, text, token_count, terms_version FROM memory_units WHERE bank_id = $1",
                bank,
            ):
                expected, length = term_frequencies(str(row["text"]))
                postings = await conn.fetch(
                    "SELECT term, tf FROM memory_terms WHERE unit_id = $1", row["id"]
                )
                assert {str(p["term"]): int(p["tf"]) for p in postings} == expected
                assert (row["token_count"], row["terms_version"]) == (length, TERMS_VERSION)

        response = await client.post(
            f"{BASE}/{bank}/memories/recall", json={"query": QUERY, "budget": "mid"}
        )
        assert response.status_code == 200, response.text
        assert "团子" in response.json()["results"][0]["text"]

    assert await asyncio.to_thread(cli.main, ["retokenize", "--status"]) == 0
    assert capsys.readouterr().out == "0 memories to re-tokenise (all banks)\n"
