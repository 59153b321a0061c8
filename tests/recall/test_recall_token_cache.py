"""The token-vector cache: bounded, least recently used first out, never serves a stale blob,
warmed with a bank's blobs without evicting anything or keeping what an erasure raced."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from engine.db import Pool
from engine.recall.candidates import fetch_rows, warm_token_cache
from engine.recall.token_cache import TokenVectorCache
from engine.recall.types import BlobCounts
from recall.recall_support import Banks

T0 = datetime(2024, 1, 1, tzinfo=UTC)


async def _fetch_one(
    pool: Pool, bank: str, fact: str, cache: TokenVectorCache
) -> tuple[bytes | None, BlobCounts]:
    """The fact's row as recall fetches it (its token vectors and its chunk neighbours'),
    with how many blobs came from the cache and how many were read."""
    counts = BlobCounts()
    rows = await fetch_rows(
        pool,
        bank,
        [fact],
        token_vectors=True,
        entities=False,
        neighbours=4,
        cache=cache,
        counts=counts,
    )
    return rows[0].token_vectors, counts


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
        return await _fetch_one(recall_pool, banks.main, fact, cache)

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


async def test_a_warm_fills_free_room_with_the_banks_blobs_and_undoes_itself_on_a_discard(
    recall_pool: Pool, banks: Banks
) -> None:
    async with recall_pool.acquire() as conn:
        stored = {
            r["id"]: r["token_vectors"]
            for r in await conn.fetch(
                "SELECT id::text AS id, token_vectors FROM memory_units WHERE bank_id = $1"
                " AND state = 'active' AND token_vectors IS NOT NULL",
                banks.main,
            )
        }
    assert len(stored) > 3
    held = TokenVectorCache(2**24)
    held.put("elsewhere", T0, b"e" * 10)
    assert await warm_token_cache(recall_pool, held, banks.main) == len(stored)
    assert len(held) == len(stored) + 1 and "elsewhere" in held  # nothing evicted
    # Every blob a recall of the bank then needs is in memory: no read.
    fact = banks.ids["zelda"]
    blob, counts = await _fetch_one(recall_pool, banks.main, fact, held)
    assert blob == stored[fact] and counts.read == 0 and counts.cached >= 1

    # Full: it stops without evicting what was there.
    small = TokenVectorCache(len(max(stored.values(), key=len)) + 10)
    small.put("elsewhere", T0, b"e" * 10)
    assert await warm_token_cache(recall_pool, small, banks.main) <= 1
    assert "elsewhere" in small

    # A discard (an erasure) while the warm reads: what it read may be the erased fact's, so
    # it keeps nothing. One row a batch makes the discard land between two batches.
    racing = _ErasedDuringTheWarm(2**24)
    assert await warm_token_cache(recall_pool, racing, banks.main, batch=1) == 0
    assert len(racing) == 0 and racing.offered >= 1


class _ErasedDuringTheWarm(TokenVectorCache):
    """An erasure's discard right after the warm's first blob is kept."""

    offered = 0

    def offer(self, fact_id: str, version: datetime, blob: bytes) -> bool:
        kept = super().offer(fact_id, version, blob)
        self.offered += 1
        if self.offered == 1:
            self.discard(["an-erased-fact"])
        return kept
