"""Re-tokenising stored memories: BM25 postings written by an older tokeniser are replaced by
what engine/text.py produces today, so a bank that stored Chinese before the word
segmentation is found by today's queries.

`memory_units.terms_version` says which tokeniser wrote a memory's terms (`TERMS_VERSION`).
`retokenize_batch` takes the next stale memories in id order (one bank or all), computes
their terms with `term_frequencies` — the function retain and consolidation store with — and,
where they differ from the stored postings, rewrites the postings, the token count and the
BM25 statistics in one transaction; then it marks them current. Progress lives in the rows
themselves, so a run stopped anywhere resumes where it was, and retains, recalls and
consolidation carry on meanwhile. Memories whose terms did not change (English text, Chinese
written after the switch) only get their version updated.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Final

from engine.db import Connection, Pool
from engine.text import TERMS_VERSION, term_frequencies

# The migration that added `terms_version`: a database it is applied to may hold postings of
# an older tokeniser, and whoever applies it says so (the worker's log, `engram migrate`).
TERMS_MIGRATION: Final = "0024_terms_version.sql"
ADVICE: Final = (
    "memories stored before this upgrade keep their old keyword-index terms (Chinese as"
    " character bigrams); run `engram retokenize` once to rewrite them"
)

# Memories per transaction: ~1 ms of tokenising each (Chinese, 2 cores under load), so a
# batch holds its row locks for well under a second.
BATCH_SIZE: Final = 500

# Keyset over the primary key: each batch starts after the last, so a run reads the table
# once (an `OR $3 IS NULL` in one statement would let a generic plan start from the first id).
_STALE_FIRST = """
SELECT id::text FROM memory_units
WHERE terms_version < $1 AND ($2::text IS NULL OR bank_id = $2)
ORDER BY id
LIMIT $3
"""
_STALE_AFTER = """
SELECT id::text FROM memory_units
WHERE terms_version < $1 AND ($2::text IS NULL OR bank_id = $2) AND id > $4::uuid
ORDER BY id
LIMIT $3
"""
_COUNT_STALE = """
SELECT count(*) FROM memory_units WHERE terms_version < $1 AND ($2::text IS NULL OR bank_id = $2)
"""
# Lock order, shared with retain and consolidation (engine/retain/upsert.py): facts first, in
# consolidation's order, then the bank's statistics row, then BM25 term rows. Rows another
# writer re-tokenised meanwhile (a correction) are skipped by the version test.
_LOCK_UNITS = """
SELECT id::text, bank_id, text, token_count FROM memory_units
WHERE id = ANY($1::uuid[]) AND terms_version < $2
ORDER BY coalesce(occurred_start, mentioned_at, created_at), id
FOR UPDATE
"""
_POSTINGS = "SELECT unit_id::text, term, tf FROM memory_terms WHERE unit_id = ANY($1::uuid[])"
_TOTAL_TERMS = "UPDATE bank_stats SET total_terms = total_terms + $2 WHERE bank_id = $1"
# Term statistics rows are locked in term order before the delete and insert triggers update
# them, so two writers touching the same terms queue instead of deadlocking.
_LOCK_TERM_STATS = """
SELECT count(*) FROM (
    SELECT 1 FROM bank_term_stats WHERE bank_id = $1 AND term = ANY($2::text[])
    ORDER BY term FOR UPDATE
) locked
"""
_DROP_POSTINGS = "DELETE FROM memory_terms WHERE unit_id = ANY($1::uuid[])"
_ADD_POSTINGS = """
INSERT INTO memory_terms (bank_id, term, unit_id, tf)
SELECT $1, * FROM unnest($2::text[], $3::uuid[], $4::int[])
ON CONFLICT DO NOTHING
"""
_DROP_UNUSED_TERMS = """
DELETE FROM bank_term_stats WHERE bank_id = $1 AND term = ANY($2::text[]) AND df <= 0
"""
_MARK = """
UPDATE memory_units m SET token_count = u.token_count, terms_version = $2
FROM unnest($1::uuid[], $3::int[]) AS u(id, token_count)
WHERE m.id = u.id
"""


@dataclass(frozen=True)
class RetokenizeBatch:
    """One batch's outcome: memories looked at, those whose postings changed, and the last
    id (where the next batch starts; None when nothing stale was left)."""

    checked: int
    rewritten: int
    last_id: str | None


@dataclass(frozen=True)
class _Unit:
    id: str
    bank_id: str
    token_count: int
    terms: dict[str, int]
    length: int


async def stale_count(conn: Connection, bank_id: str | None = None) -> int:
    """Memories whose terms an older tokeniser wrote."""
    return int(await conn.fetchval(_COUNT_STALE, TERMS_VERSION, bank_id))


async def retokenize_batch(
    pool: Pool,
    *,
    bank_id: str | None = None,
    after_id: str | None = None,
    batch_size: int = BATCH_SIZE,
    cpu: Executor | None = None,
) -> RetokenizeBatch:
    """Re-tokenise the next `batch_size` stale memories after `after_id` (id order)."""
    async with pool.acquire() as conn:
        stale = (
            await conn.fetch(_STALE_FIRST, TERMS_VERSION, bank_id, batch_size)
            if after_id is None
            else await conn.fetch(_STALE_AFTER, TERMS_VERSION, bank_id, batch_size, after_id)
        )
        ids = [str(r["id"]) for r in stale]
        if not ids:
            return RetokenizeBatch(0, 0, None)
        async with conn.transaction():
            rows = await conn.fetch(_LOCK_UNITS, ids, TERMS_VERSION)
            texts = [str(r["text"]) for r in rows]
            loop = asyncio.get_running_loop()
            counted = await loop.run_in_executor(cpu, _term_frequencies_of, texts)
            units = [
                _Unit(str(r["id"]), str(r["bank_id"]), int(r["token_count"]), tf, length)
                for r, (tf, length) in zip(rows, counted, strict=True)
            ]
            stored = await _stored_postings(conn, [u.id for u in units])
            changed = [
                u for u in units if u.terms != stored.get(u.id, {}) or u.length != u.token_count
            ]
            for bank in sorted({u.bank_id for u in changed}):
                await _rewrite(conn, bank, [u for u in changed if u.bank_id == bank], stored)
            await conn.execute(
                _MARK, [u.id for u in units], TERMS_VERSION, [u.length for u in units]
            )
        return RetokenizeBatch(len(ids), len(changed), ids[-1])


def _term_frequencies_of(texts: Sequence[str]) -> list[tuple[dict[str, int], int]]:
    return [term_frequencies(text) for text in texts]


async def _stored_postings(conn: Connection, ids: list[str]) -> dict[str, dict[str, int]]:
    stored: dict[str, dict[str, int]] = {}
    for r in await conn.fetch(_POSTINGS, ids):
        stored.setdefault(str(r["unit_id"]), {})[str(r["term"])] = int(r["tf"])
    return stored


async def _rewrite(
    conn: Connection, bank_id: str, units: list[_Unit], stored: dict[str, dict[str, int]]
) -> None:
    """Replace the postings of `units` (all of `bank_id`); the term-statistics triggers move
    each term's document frequency, and the bank's total length moves here."""
    old_terms = {t for u in units for t in stored.get(u.id, {})}
    new_postings = {(term, u.id): tf for u in units for term, tf in u.terms.items()}
    touched = sorted(old_terms | {term for term, _ in new_postings})
    await conn.execute(_TOTAL_TERMS, bank_id, sum(u.length - u.token_count for u in units))
    await conn.execute(_LOCK_TERM_STATS, bank_id, touched)
    await conn.execute(_DROP_POSTINGS, [u.id for u in units])
    ordered = sorted(new_postings.items())
    await conn.execute(
        _ADD_POSTINGS,
        bank_id,
        [term for (term, _), _ in ordered],
        [unit for (_, unit), _ in ordered],
        [tf for _, tf in ordered],
    )
    await conn.execute(_DROP_UNUSED_TERMS, bank_id, sorted(old_terms))
