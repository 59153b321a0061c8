"""A bank's conversations held in memory (engine/recall/graph_cache.py), for
context_memory.py: what context.py's NEIGHBOURS_SQL reads of the bank.

Per fact in id order (read in the graph's snapshot): its chunk's document (its rank in the
database's order of document ids) and chunk index, its conversation (the rank of its (context,
tags, thread)), `source_start` and `updated_at` (the version the token-vector cache is keyed
by); and two orders of the facts: the timeline (conversation, mentioned_at, document, chunk
index, id: the statement's scan order, both ways) with each position's mentioned_at, and the
documents' chunks (document, chunk index, id), and each fact's place on the timeline. 44 B a
fact.
"""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg
import numpy as np
from numpy.typing import NDArray

from engine.db import Connection
from engine.recall.context import thread_sql

# Per fact in id order, as graph_cache's _FACTS numbers them: -1 for a fact with no chunk (on
# no timeline and in no document's chunks, as in the statement, which joins chunks).
_TIMELINE = f"""
WITH f AS (
    SELECT m.id, m.updated_at, coalesce(m.source_start, 0) AS at, ch.chunk_index,
           CASE WHEN ch.chunk_id IS NOT NULL
                THEN dense_rank() OVER (ORDER BY ch.document_id) - 1 END AS doc,
           CASE WHEN ch.chunk_id IS NOT NULL
                THEN dense_rank() OVER (
                    ORDER BY m.context, m.tags,
                             {thread_sql("m")}
                ) - 1 END AS line
    FROM memory_units m
    LEFT JOIN chunks ch ON ch.bank_id = m.bank_id AND ch.chunk_id = m.chunk_id
    WHERE m.bank_id = $1
)
SELECT string_agg(int4send(coalesce(doc, -1)::int), ''::bytea ORDER BY id) AS docs,
       string_agg(int4send(coalesce(chunk_index, -1)), ''::bytea ORDER BY id) AS chunks,
       string_agg(int4send(coalesce(line, -1)::int), ''::bytea ORDER BY id) AS lines,
       string_agg(int4send(at), ''::bytea ORDER BY id) AS ats,
       string_agg(timestamptz_send(updated_at), ''::bytea ORDER BY id) AS versions
FROM f
"""

Int32s = NDArray[np.int32]
Int64s = NDArray[np.int64]


@dataclass(frozen=True)
class Timeline:
    """What NEIGHBOURS_SQL reads of a bank, held (module docstring)."""

    doc: Int32s  # per fact: its chunk's document (rank of the id), -1 without a chunk
    chunk: Int32s  # per fact: its chunk's index, -1 without a chunk
    line: Int32s  # per fact: its conversation (rank of context, tags, thread), -1: no chunk
    at: Int32s  # per fact: coalesce(source_start, 0)
    version: Int64s  # per fact: updated_at, microseconds since PG_EPOCH
    order: Int32s  # facts with a chunk and a mention time, in timeline order
    rank: Int32s  # per fact: its place in `order`, -1 if on no timeline
    order_at: Int64s  # mentioned_at of each of `order`
    line_starts: Int32s  # conversation l is order[line_starts[l]:line_starts[l + 1]]
    by_doc: Int32s  # facts with a chunk by (document, chunk index, id)
    doc_starts: Int32s  # document d is by_doc[doc_starts[d]:doc_starts[d + 1]]

    @property
    def nbytes(self) -> int:
        arrays = (self.doc, self.chunk, self.line, self.at, self.version, self.order, self.rank)
        rest = (self.order_at, self.line_starts, self.by_doc, self.doc_starts)
        return int(sum(a.nbytes for a in (*arrays, *rest)))


async def read_timeline(conn: Connection, bank_id: str) -> asyncpg.Record | None:
    """Read in the caller's transaction (the graph's REPEATABLE READ snapshot)."""
    return await conn.fetchrow(_TIMELINE, bank_id)


def timeline_of(
    row: asyncpg.Record | None,
    mentioned_at: NDArray[np.int64],
    mentioned: NDArray[np.bool_],
    size: int,
) -> Timeline:
    """The arrays from the row read, for a bank of `size` facts whose mention times (and
    whether they have one) are given (CPU: the thread pool)."""

    def column(name: str, dtype: str) -> NDArray[np.int64]:
        packed = row[name] if row is not None and size else None
        return np.frombuffer(packed or b"", dtype=dtype).astype(np.int64)

    doc, chunk, line = column("docs", ">i4"), column("chunks", ">i4"), column("lines", ">i4")
    at, version = column("ats", ">i4"), column("versions", ">i8")
    assert len(doc) == size  # the same facts, the same snapshot
    units = np.arange(size, dtype=np.int64)
    on_line = np.flatnonzero((line >= 0) & mentioned)
    # np.lexsort sorts by the last key first.
    order = on_line[
        np.lexsort(
            (units[on_line], chunk[on_line], doc[on_line], mentioned_at[on_line], line[on_line])
        )
    ]
    rank = np.full(size, -1, dtype=np.int32)
    rank[order] = np.arange(len(order), dtype=np.int32)
    chunked = np.flatnonzero(line >= 0)
    by_doc = chunked[np.lexsort((units[chunked], chunk[chunked], doc[chunked]))]
    return Timeline(
        doc=doc.astype(np.int32),
        chunk=chunk.astype(np.int32),
        line=line.astype(np.int32),
        at=at.astype(np.int32),
        version=version,
        order=order.astype(np.int32),
        rank=rank,
        order_at=mentioned_at[order],
        line_starts=_starts(line[order], int(line.max(initial=-1)) + 1),
        by_doc=by_doc.astype(np.int32),
        doc_starts=_starts(doc[by_doc], int(doc.max(initial=-1)) + 1),
    )


def _starts(keys: NDArray[np.int64], count: int) -> Int32s:
    """Offsets of each key's run in `keys` (sorted, 0..count-1)."""
    starts = np.zeros(count + 1, dtype=np.int32)
    np.cumsum(np.bincount(keys, minlength=count), out=starts[1:])
    return starts
