"""The token budget: how many facts fit in `max_tokens`.

Tokens are estimated as ceil(characters / 4), the usual English average for BPE tokenisers
(cl100k and MiniLM's WordPiece both land within ~20% on chat text); the same estimate is used
for every budget (results, entities, chunks), so budgets are consistent with each other and
cost nothing to compute.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from engine.recall.types import ChunkText

T = TypeVar("T")

CHARS_PER_TOKEN = 4


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def fill_budget(
    items: Sequence[T], cost: Callable[[T], int], max_tokens: int
) -> tuple[list[T], int]:
    """Items in order while they fit; one that does not fit is skipped and filling goes on.
    A fact is never cut. If the first item alone exceeds the budget it is returned alone.
    Returns the kept items and the tokens they use."""
    kept: list[T] = []
    used = 0
    for index, item in enumerate(items):
        tokens = cost(item)
        if index == 0 and tokens > max_tokens:
            return [item], tokens
        if used + tokens <= max_tokens:
            kept.append(item)
            used += tokens
    return kept, used


def fill_preferring_observations(
    items: Sequence[T],
    ident: Callable[[T], str],
    is_observation: Callable[[T], bool],
    evidence: Mapping[str, Sequence[str]],
    cost: Callable[[T], int],
    max_tokens: int,
) -> tuple[list[T], int]:
    """Hindsight's `prefer_observations`: a raw fact an observation in the answer was built
    from is dropped, and the budget it held goes to the next candidates in order. Repeated
    until nothing more drops (a backfilled observation may cover facts already kept); it
    ends because every round drops at least one fact for good."""
    dropped: set[str] = set()
    while True:
        kept, used = fill_budget([i for i in items if ident(i) not in dropped], cost, max_tokens)
        covered = {f for i in kept if is_observation(i) for f in evidence.get(ident(i), ())}
        newly = {ident(i) for i in kept if not is_observation(i) and ident(i) in covered}
        if not newly:
            return kept, used
        dropped |= newly


def fit_chunks(chunks: list[tuple[str, str, int]], max_tokens: int) -> list[ChunkText]:
    """Chunks in result order; the first that does not fit is cut to what is left, then stop."""
    out: list[ChunkText] = []
    left = max_tokens
    for chunk_id, text, index in chunks:
        tokens = estimate_tokens(text)
        if tokens <= left:
            out.append(ChunkText(chunk_id, text, index, False))
            left -= tokens
            continue
        if left > 0:
            out.append(ChunkText(chunk_id, text[: left * 4], index, True))
        break
    return out
