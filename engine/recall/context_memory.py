"""A fact's context for the rerank from the bank held in memory (engine/recall/graph_cache.py):
the same neighbours as context.py's NEIGHBOURS_SQL, with no statement, over the arrays of
engine/recall/timeline.py.

Exact on the graph's terms: every write of what the statement reads goes with a fact inserted
or deleted or its `updated_at` set (correction rewrites `context`, consolidation an
observation's `mentioned_at`), which `bank_changes` counts; a chunk's index and document never
change once written (engine/retain/upsert.py inserts chunks `ON CONFLICT DO NOTHING`). The
statement's gap is an interval, added to a timestamptz in the session's time zone when it has a
day part, so only gaps shorter than a day are answered here (RecallConfig's is an hour).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

import numpy as np
from numpy.typing import NDArray

from engine.recall.context import Around
from engine.recall.graph_memory import PG_EPOCH, Dates
from engine.recall.timeline import Timeline

_MICROSECOND = timedelta(microseconds=1)
# Gaps shorter than this are added the same way in any time zone (module docstring).
HELD_GAP = timedelta(days=1)


def held_neighbours(
    timeline: Timeline,
    dates: Dates,
    ids: Sequence[str],
    index: Mapping[str, int],
    candidates: Sequence[str],
    *,
    neighbours: int,
    chunks: int,
    gap: timedelta,
    scan: int,
) -> Around | None:
    """NEIGHBOURS_SQL over the held bank, for `candidates` (fact ids); `ids` and `index` are
    the held facts' ids in order and their positions. None when it cannot answer exactly:
    a candidate the bank does not hold (written after it was read), or a gap of HELD_GAP or
    more.

    Every candidate's timeline at once (the statement's `g`: one per distinct moment and
    conversation), as slices of the held timeline laid end to end, so the cost is a few numpy
    calls per recall rather than per candidate."""
    if gap >= HELD_GAP or any(c not in index for c in candidates):
        return None
    facts = np.fromiter(dict.fromkeys(index[c] for c in candidates), dtype=np.int64)
    facts = facts[timeline.line[facts] >= 0]  # no chunk: no context (the statement's join)
    timed = facts[dates.mentioned[facts]]
    found = _on_lines(timeline, dates, timed, neighbours, chunks, gap // _MICROSECOND, scan)
    for fact in facts.tolist():
        if fact not in found:  # no mention time, or left off its timeline by the scan bound
            found[fact] = _in_document(timeline, fact, neighbours, chunks)
    versions = _versions(timeline, ids, found)
    return Around({ids[f]: [ids[n] for n in near] for f, near in found.items()}, versions)


def _versions(
    timeline: Timeline, ids: Sequence[str], found: dict[int, list[int]]
) -> dict[str, datetime]:
    """fact id -> updated_at of every neighbour found, as asyncpg decodes it. A datetime per
    distinct value: facts written in one transaction share it, so a recall's ~600 neighbours
    have a handful (building one per neighbour was most of this module's time)."""
    near = np.unique(np.fromiter((n for f in found.values() for n in f), dtype=np.int64))
    values, which = np.unique(timeline.version[near], return_inverse=True)
    moments = [PG_EPOCH + timedelta(microseconds=v) for v in values.tolist()]
    return {ids[n]: moments[k] for n, k in zip(near.tolist(), which.tolist(), strict=True)}


def _on_lines(
    timeline: Timeline,
    dates: Dates,
    timed: NDArray[np.int64],
    neighbours: int,
    chunks: int,
    gap: int,
    scan: int,
) -> dict[int, list[int]]:
    """The neighbours of the candidates `timed` (facts with a chunk and a mention time) that
    their timeline's scan keeps, nearest first."""
    if not len(timed):
        return {}
    keys = np.stack((timeline.line[timed].astype(np.int64), dates.mentioned_at[timed]))
    (lines, moments), group = np.unique(keys, axis=1, return_inverse=True)
    group = group.reshape(-1)
    # Per timeline: before, mentioned in [moment - gap, moment], the last `scan` of them in
    # timeline order (the statement's descending scan); after, in (moment, moment + gap],
    # the first `scan`: one slice [start, stop) of the held order.
    first, middle, last = (np.empty(len(lines), dtype=np.int64) for _ in range(3))
    for line in np.unique(lines).tolist():
        mine = lines == line
        lo, hi = int(timeline.line_starts[line]), int(timeline.line_starts[line + 1])
        at = timeline.order_at[lo:hi]
        first[mine] = lo + np.searchsorted(at, moments[mine] - gap, "left")
        middle[mine] = lo + np.searchsorted(at, moments[mine], "right")
        last[mine] = lo + np.searchsorted(at, moments[mine] + gap, "right")
    start, stop = np.maximum(first, middle - scan), np.minimum(last, middle + scan)
    lengths = stop - start
    offsets = np.cumsum(lengths) - lengths
    total = int(lengths.sum())
    spots = np.repeat(start - offsets, lengths) + np.arange(total)  # into the held order
    members = timeline.order[spots].astype(np.int64)
    # dense_rank() over (mentioned_at, document, chunk index) within each timeline (each
    # slice is in that order); a jump of more than 2 * chunks between timelines keeps every
    # candidate's steps inside its own.
    steps = np.zeros(total, dtype=np.int64)
    when, doc, chunk = timeline.order_at[spots], timeline.doc[members], timeline.chunk[members]
    steps[1:] = (np.diff(when) != 0) | (np.diff(doc) != 0) | (np.diff(chunk) != 0)
    heads = offsets[lengths > 0]
    steps[heads[heads > 0]] = 2 * chunks + 2
    pos = np.cumsum(steps)
    # A candidate is on its timeline when the scan kept it (the statement's `placed`).
    rank = timeline.rank[timed].astype(np.int64)
    placed = (rank >= start[group]) & (rank < stop[group])
    owners = timed[placed]
    where = offsets[group[placed]] + rank[placed] - start[group[placed]]
    p = pos[where]
    a = np.searchsorted(pos, p - chunks, "left")
    b = np.searchsorted(pos, p + chunks, "right")
    counts = b - a
    owner = np.repeat(np.arange(len(owners)), counts)
    near = np.repeat(a - (np.cumsum(counts) - counts), counts) + np.arange(int(counts.sum()))
    keep = near != where[owner]
    owner, near = owner[keep], near[keep]
    others = members[near]
    # ORDER BY abs(pos difference), abs(source_start difference), id; per candidate.
    ranked = np.lexsort(
        (
            others,
            np.abs(timeline.at[others].astype(np.int64) - timeline.at[owners[owner]]),
            np.abs(pos[near] - p[owner]),
            owner,
        )
    )
    owner, others = owner[ranked], others[ranked]
    heads = np.searchsorted(owner, np.arange(len(owners)), "left")
    ends = np.minimum(heads + neighbours, np.searchsorted(owner, np.arange(len(owners)), "right"))
    listed = others.tolist()
    return {
        f: listed[h:e]
        for f, h, e in zip(owners.tolist(), heads.tolist(), ends.tolist(), strict=True)
    }


def _in_document(timeline: Timeline, fact: int, neighbours: int, chunks: int) -> list[int]:
    """The statement's fallback: the facts of the chunks at most `chunks` away in the fact's
    own document, nearest chunk first, then nearest in the text, then by id."""
    doc, chunk = int(timeline.doc[fact]), int(timeline.chunk[fact])
    lo, hi = int(timeline.doc_starts[doc]), int(timeline.doc_starts[doc + 1])
    indexes = timeline.chunk[timeline.by_doc[lo:hi]]
    a = lo + int(np.searchsorted(indexes, chunk - chunks, "left"))
    b = lo + int(np.searchsorted(indexes, chunk + chunks, "right"))
    others = timeline.by_doc[a:b].astype(np.int64)
    others = others[others != fact]
    ranked = np.lexsort(
        (
            others,
            _distance(timeline.at[others], timeline.at[fact]),
            _distance(timeline.chunk[others], chunk),
        )
    )
    result: list[int] = others[ranked[:neighbours]].tolist()
    return result


def _distance(values: NDArray[np.int32], to: int | np.int32) -> NDArray[np.int64]:
    """abs(value - to), in int64 (no int32 overflow)."""
    result: NDArray[np.int64] = np.abs(values.astype(np.int64) - int(to))
    return result
