"""The token-vector cache: bounded, least recently used first out, never serves a stale blob."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from engine.db import Pool
from engine.recall.candidates import fetch_rows
from engine.recall.token_cache import TokenVectorCache
from engine.recall.types import BlobCounts
from recall.recall_support import Banks

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def test_a_blob_is_served_only_for_the_version_it_was_stored_with() -> None:
    cache = TokenVectorCache(1000)
    cache.put("a", T0, b"x" * 10)
    assert cache.get("a", T0) == b"x" * 10
    assert cache.get("a", T0 + timedelta(seconds=1)) is None
    assert cache.get("b", T0) is None
    assert "a" in cache and "b" not in cache


def test_the_least_recently_used_blob_goes_first_when_full() -> None:
    cache = TokenVectorCache(30)
    for name in ("a", "b", "c"):
        cache.put(name, T0, name.encode() * 10)
    assert cache.get("a", T0) is not None  # a is now the most recent
    cache.put("d", T0, b"d" * 10)
    assert cache.get("b", T0) is None
    assert all(cache.get(name, T0) is not None for name in ("a", "c", "d"))
    assert cache.size_bytes == 30 and len(cache) == 3


def test_a_replaced_blob_is_counted_once_and_oversized_ones_are_not_kept() -> None:
    cache = TokenVectorCache(25)
    cache.put("a", T0, b"1" * 10)
    cache.put("a", T0 + timedelta(days=1), b"2" * 20)
    assert cache.size_bytes == 20 and len(cache) == 1
    cache.put("big", T0, b"3" * 26)
    assert cache.get("big", T0) is None and cache.get("a", T0 + timedelta(days=1)) == b"2" * 20
    disabled = TokenVectorCache(0)
    disabled.put("a", T0, b"1")
    assert not disabled.enabled and disabled.get("a", T0) is None


async def test_fetched_rows_use_the_cache_until_the_fact_changes(
    recall_pool: Pool, banks: Banks
) -> None:
    fact = banks.ids["zelda"]
    cache = TokenVectorCache(2**20)

    async def fetch() -> tuple[bytes | None, BlobCounts]:
        counts = BlobCounts()
        rows = await fetch_rows(
            recall_pool,
            banks.main,
            [fact],
            token_vectors=True,
            entities=False,
            neighbours=4,
            cache=cache,
            counts=counts,
        )
        return rows[0].token_vectors, counts

    async with recall_pool.acquire() as conn:
        stored = await conn.fetchrow(
            "SELECT token_vectors, updated_at FROM memory_units WHERE id = $1", fact
        )
    assert stored is not None and stored["token_vectors"]
    first, counts = await fetch()
    assert first == stored["token_vectors"] and counts.cached == 0 and counts.read >= 1
    second, again = await fetch()
    assert second == first and again == BlobCounts(cached=counts.read, read=0)
    # Consolidation rewrites an observation's text and vectors in place, with a new updated_at.
    rewritten = bytes(reversed(stored["token_vectors"]))
    try:
        async with recall_pool.acquire() as conn:
            await conn.execute(
                "UPDATE memory_units SET token_vectors = $2, updated_at = now() WHERE id = $1",
                fact,
                rewritten,
            )
        third, after = await fetch()
        assert third == rewritten
        assert after == BlobCounts(cached=counts.read - 1, read=1)
    finally:
        async with recall_pool.acquire() as conn:
            await conn.execute(
                "UPDATE memory_units SET token_vectors = $2, updated_at = $3 WHERE id = $1",
                fact,
                stored["token_vectors"],
                stored["updated_at"],
            )
