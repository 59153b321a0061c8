"""A cached bank's keyword index: per term its postings (fact index, tf) and df, per fact its
token_count, per bank N and avgdl, read in the graph's snapshot (engine/recall/graph_cache.py)
and scored by engine/recall/keyword_memory.py.

Memory: 4 B (fact) + 2 B (tf) per posting, 4 B per fact (token_count), ~160 B per distinct
term (the str, its dict entry, df, start). Measured at 100k facts: docs/benchmarks.md
"Keyword arm from memory".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import asyncpg
import numpy as np
from numpy.typing import NDArray

from engine.db import Connection

# Bytes a distinct term costs besides its postings: the str (~60 B), its dict entry (~90 B),
# df and start (8 B).
BYTES_PER_TERM = 160

# Facts numbered in id order, as graph_cache's _FACTS and _NUMBERED number them.
_POSTINGS = """
WITH u AS (SELECT id, (row_number() OVER (ORDER BY id) - 1)::int AS i
           FROM memory_units WHERE bank_id = $1)
SELECT s.term, s.df,
       string_agg(int4send(u.i), ''::bytea ORDER BY u.i) AS units,
       string_agg(int4send(t.tf), ''::bytea ORDER BY u.i) AS tf
FROM bank_term_stats s
JOIN memory_terms t ON t.bank_id = $1 AND t.term = s.term
JOIN u ON u.id = t.unit_id
WHERE s.bank_id = $1 AND s.df > 0
GROUP BY s.term, s.df
"""

_LENGTHS = """
SELECT string_agg(int4send(token_count), ''::bytea ORDER BY id) AS lengths,
       (SELECT unit_count FROM bank_stats WHERE bank_id = $1) AS n,
       (SELECT total_terms FROM bank_stats WHERE bank_id = $1) AS total
FROM memory_units WHERE bank_id = $1
"""


@dataclass(frozen=True)
class PostingRows:
    """What `read_postings` read, turned into `Postings` in the thread pool."""

    terms: Sequence[asyncpg.Record]
    lengths: asyncpg.Record | None


@dataclass(frozen=True)
class Postings:
    """A bank's keyword index. N is None when the bank has no statistics row (the statement
    then finds nothing either)."""

    index: Mapping[str, int]  # term -> its row
    df: NDArray[np.int32]
    starts: NDArray[np.int64]  # row r: units[starts[r]:starts[r + 1]]
    units: NDArray[np.int32]
    tf: NDArray[np.uint16] | NDArray[np.int32]  # int32 only if some tf exceeds 65,535
    lengths: NDArray[np.int32]  # per fact, token_count
    unit_count: float | None
    avgdl: float

    @property
    def nbytes(self) -> int:
        arrays = self.df.nbytes + self.starts.nbytes + self.units.nbytes + self.tf.nbytes
        return int(arrays + self.lengths.nbytes + BYTES_PER_TERM * len(self.index))


async def read_postings(conn: Connection, bank_id: str) -> PostingRows:
    """Read in the caller's transaction (the graph's REPEATABLE READ snapshot)."""
    terms = await conn.fetch(_POSTINGS, bank_id)
    lengths = await conn.fetchrow(_LENGTHS, bank_id)
    return PostingRows(terms, lengths)


def postings_of(rows: PostingRows, size: int) -> Postings:
    """The arrays from the rows read, for a bank of `size` facts (CPU: the thread pool)."""
    counts = [len(r["units"]) // 4 for r in rows.terms]
    starts = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=starts[1:])
    units = np.frombuffer(b"".join(r["units"] for r in rows.terms), dtype=">i4").astype(np.int32)
    tf_wide = np.frombuffer(b"".join(r["tf"] for r in rows.terms), dtype=">i4").astype(np.int32)
    tf: NDArray[np.uint16] | NDArray[np.int32] = (
        tf_wide.astype(np.uint16) if not len(tf_wide) or int(tf_wide.max()) <= 65535 else tf_wide
    )
    head = rows.lengths
    packed = head["lengths"] if head is not None and head["lengths"] is not None else b""
    lengths = np.frombuffer(packed, dtype=">i4").astype(np.int32)
    assert len(lengths) == size  # the same facts, the same snapshot
    n = float(head["n"]) if head is not None and head["n"] is not None else None
    total = float(head["total"]) if head is not None and head["total"] is not None else 0.0
    return Postings(
        index={r["term"]: k for k, r in enumerate(rows.terms)},
        df=np.array([r["df"] for r in rows.terms], dtype=np.int32),
        starts=starts,
        units=units,
        tf=tf,
        lengths=lengths,
        unit_count=n,
        avgdl=total / n if n else 0.0,
    )
