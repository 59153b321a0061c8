"""A fact's access state: its memory_units columns with the accesses flushed since the
lifecycle last folded them (table fact_access, migration 0041) applied.

Reinforcement (engine/lifecycle/access.py) writes only the narrow side row; readers join it
(`JOIN` with the `STRENGTH`, `ACCESS_COUNT`, `LAST_ACCESSED` columns, over a fact aliased
`m`), and a writer of `strength` or `access_count` folds the side row into the fact first
(`fold`), so the order of events is kept: a flush's accesses come before what is written
after them. The lifecycle batch folds every side row of its range of ids before decaying
(engine/lifecycle/maintenance.py), in the transaction that rewrites those facts anyway.
    strength          1 − (1 − strength) · keep     (keep = Π (1 − step)^n, step at each flush)
    access_count      access_count + accesses
    last_accessed_at  the later of the two
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from engine.db import Connection

JOIN = "LEFT JOIN fact_access fa ON fa.bank_id = m.bank_id AND fa.fact_id = m.id"
STRENGTH = "coalesce(1 - (1 - m.strength) * fa.keep, m.strength)"
ACCESS_COUNT = "m.access_count + coalesce(fa.accesses, 0)"
LAST_ACCESSED = "greatest(m.last_accessed_at, fa.last_accessed_at)"


def folding(bank: str, which: str) -> str:
    """The CTEs `taken` and `folded` for a statement that folds side rows into the facts it
    writes: the side rows of bank `bank` (a parameter) matching `which`, taken in id order, as
    a flush takes them, and deleted; `folded` returns (fact_id, accesses, last_accessed_at,
    keep). Side rows another transaction holds (a flush) are left for the next fold rather
    than waited for: a fold never waits on a flush, whatever else its transaction holds."""
    return f"""taken AS (
    SELECT fact_id FROM fact_access
    WHERE bank_id = {bank} AND {which}
    ORDER BY fact_id
    FOR UPDATE SKIP LOCKED
), folded AS (
    DELETE FROM fact_access f USING taken t
    WHERE f.bank_id = {bank} AND f.fact_id = t.fact_id
    RETURNING f.fact_id, f.accesses, f.last_accessed_at, f.keep
)"""


def id_range(after: str, upto: str) -> str:
    """Fact ids in (after, upto], two uuid parameters, either NULL for an open end."""
    return (
        f"({after}::uuid IS NULL OR fact_id > {after})"
        f" AND ({upto}::uuid IS NULL OR fact_id <= {upto})"
    )


def _fold(which: str) -> str:
    return f"""
WITH {folding("$1", which)}
UPDATE memory_units m SET
    access_count = m.access_count + f.accesses,
    last_accessed_at = greatest(m.last_accessed_at, f.last_accessed_at),
    strength = 1 - (1 - m.strength) * f.keep
FROM folded f
WHERE m.bank_id = $1 AND m.id = f.fact_id
"""


_FOLD_IDS = _fold("fact_id = ANY($2::uuid[])")
_FOLD_RANGE = _fold(id_range("$2", "$3"))

# In id order, as a flush takes them, so a deletion and a flush never deadlock.
_FORGET = """
DELETE FROM fact_access f USING (
    SELECT fact_id FROM fact_access
    WHERE bank_id = $1 AND ($2::uuid[] IS NULL OR fact_id = ANY($2::uuid[]))
    ORDER BY fact_id
    FOR UPDATE
) t
WHERE f.bank_id = $1 AND f.fact_id = t.fact_id
"""

_READ = f"""
SELECT m.id::text AS id, {ACCESS_COUNT} AS access_count, {LAST_ACCESSED} AS last_accessed_at,
       {STRENGTH} AS strength
FROM memory_units m {JOIN}
WHERE m.bank_id = $1 AND m.id = ANY($2::uuid[])
"""


@dataclass(frozen=True)
class AccessState:
    access_count: int
    last_accessed_at: datetime | None
    strength: float


async def fold(conn: Connection, bank_id: str, fact_ids: Sequence[str]) -> int:
    """Fold these facts' pending accesses into their rows; returns the facts changed."""
    if not fact_ids:
        return 0
    status = await conn.execute(_FOLD_IDS, bank_id, list(fact_ids))
    return int(status.rsplit(" ", 1)[-1])


async def fold_range(conn: Connection, bank_id: str, after: str | None, upto: str | None) -> int:
    """Fold the pending accesses of the bank's facts with ids in (after, upto] (None: open),
    whatever their state; a side row whose fact is gone is dropped."""
    status = await conn.execute(_FOLD_RANGE, bank_id, after, upto)
    return int(status.rsplit(" ", 1)[-1])


async def drop_access(conn: Connection, bank_id: str, fact_ids: Sequence[str] | None) -> None:
    """Delete the side rows of these facts (None: of the whole bank): erasure, clearing and
    deleting a bank."""
    await conn.execute(_FORGET, bank_id, None if fact_ids is None else list(fact_ids))


async def access_states(
    conn: Connection, bank_id: str, fact_ids: Sequence[str]
) -> dict[str, AccessState]:
    rows = await conn.fetch(_READ, bank_id, list(fact_ids))
    return {
        r["id"]: AccessState(int(r["access_count"]), r["last_accessed_at"], float(r["strength"]))
        for r in rows
    }
