"""Content-defined packing of units into chunks with content-addressed ids (the method and
its measurements: engine/chunking/__init__.py)."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from typing import Final

from engine.chunking.units import Chunk, Unit

# As shares of max_chars: the characters per hash boundary on average (`_cuts`), and the
# least a chunk holds unless the content runs out (`_cuts`, `_fit`). See the package docstring.
_TARGET_SHARE: Final = 0.4
_MIN_SHARE: Final = 0.25


def pack(units: Sequence[Unit], max_chars: int) -> list[list[Unit]]:
    """Group units into chunks: cut where `_cuts` says, then split each run that is still
    too long with `_fit`."""
    scores = [_cut_score(units, i) for i in range(len(units))]
    # Where each unit sits in the text of a chunk, counted from the first unit, so that
    # the length of any run of units is ends[last] - starts[first].
    starts: list[int] = []
    ends: list[int] = []
    position = 0
    for unit in units:
        position += len(unit.gap) if starts else 0
        starts.append(position)
        position += len(unit.text)
        ends.append(position)
    groups: list[list[Unit]] = []
    run_start = 0
    for i, cut in enumerate(_cuts(units, scores, max_chars)):
        if cut or i == len(units) - 1:
            for lo, hi in _fit(scores, starts, ends, run_start, i + 1, max_chars):
                groups.append(list(units[lo:hi]))
            run_start = i + 1
    return groups


def _cut_score(units: Sequence[Unit], i: int) -> float:
    """How readily a chunk ends after unit `i`, lower first: a unit's hash draw divided by
    its length, 0 before a heading, infinite after one (a heading belongs with its text)."""
    unit = units[i]
    if unit.heading:
        return math.inf
    if i + 1 < len(units) and units[i + 1].heading:
        return 0.0
    digest = hashlib.sha256(unit.text.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 / len(unit.text)


def _cuts(units: Sequence[Unit], scores: Sequence[float], max_chars: int) -> list[bool]:
    """Whether a chunk ends after each unit, decided from nearby units only.

    A unit is a boundary when its score is below ``1 / target``: its hash draw falls below
    ``len(unit) / target``, so boundaries come about once per `target` characters whatever
    the unit sizes. A boundary becomes a cut when at least `min_chars` lie since the
    previous boundary. That reference is the previous boundary, not the previous cut, so
    the decision never chains back through the document: an edit can only move the cuts
    at the edited unit and at the next boundary. The unit before a heading is always a
    boundary, so a heading starts a chunk unless too little text precedes it.
    """
    min_chars = max_chars * _MIN_SHARE
    target = max_chars * _TARGET_SHARE
    cuts: list[bool] = []
    since_boundary = 0
    for unit, score in zip(units, scores, strict=True):
        since_boundary += len(unit.text) + (len(unit.gap) if since_boundary else 0)
        boundary = score * target < 1
        cuts.append(boundary and since_boundary >= min_chars)
        if boundary:
            since_boundary = 0
    return cuts


def _fit(
    scores: Sequence[float],
    starts: Sequence[int],
    ends: Sequence[int],
    lo: int,
    hi: int,
    max_chars: int,
) -> list[tuple[int, int]]:
    """Split units[lo:hi] into runs that fit, each time after the lowest-scoring unit that
    leaves `min_chars` on both sides (any unit, if none does).

    Cutting where the next unit would not fit makes every later cut depend on where the
    run started, so an edit would re-flow the rest of the run; the lowest score depends on
    the units' own hashes, so the same split points survive edits elsewhere in the run.
    """
    min_chars = max_chars * _MIN_SHARE
    done: list[tuple[int, int]] = []
    pending = [(lo, hi)]
    while pending:  # depth-first, left part first, so runs come out in document order
        first, stop = pending.pop()
        if ends[stop - 1] - starts[first] <= max_chars:
            done.append((first, stop))
            continue
        candidates = range(first, stop - 1)
        balanced = [
            i
            for i in candidates
            if ends[i] - starts[first] >= min_chars and ends[stop - 1] - starts[i + 1] >= min_chars
        ]
        # Ties only come from repeated texts; the middle one keeps the splitting O(n log n).
        middle = (first + stop) / 2
        best = min(balanced or candidates, key=lambda i: (scores[i], abs(i - middle)))
        pending += [(best + 1, stop), (first, best + 1)]
    return done


def build_chunks(document_id: str, groups: list[list[Unit]], conversation: bool) -> list[Chunk]:
    chunks: list[Chunk] = []
    seen: dict[str, int] = {}
    prefix = document_id.encode("utf-8", "surrogatepass")
    for index, group in enumerate(groups):
        text = group[0].text + "".join(unit.gap + unit.text for unit in group[1:])
        raw = text.encode("utf-8", "surrogatepass")
        # Length-prefixed so ("ab", "c") and ("a", "bc") cannot collide.
        keyed = hashlib.sha256(len(prefix).to_bytes(8, "big") + prefix + raw).hexdigest()
        base = f"c_{keyed[:16]}"
        count = seen.get(base, 0) + 1
        seen[base] = count
        speakers = {unit.speaker for unit in group}
        speaker = speakers.pop() if conversation and len(speakers) == 1 else None
        chunks.append(
            Chunk(
                chunk_id=base if count == 1 else f"{base}_{count}",
                index=index,
                text=text,
                content_hash=hashlib.sha256(raw).hexdigest(),
                char_start=group[0].start,
                char_end=group[-1].end,
                speaker=speaker,
            )
        )
    return chunks
