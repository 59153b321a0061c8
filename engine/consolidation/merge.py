"""The near-duplicate merge: after any observation is created or revised, observations of the
same scope at MERGE_SIMILARITY or closer are folded into one (Hindsight's most reported bug is
duplicated observations), and so are those whose claims state the same belief at any
distance ("lives in Berlin" / "moved to Berlin, and no longer lives in Paris"). Claims that
parse to distinct beliefs ("likes dogs" / "likes cats") stay apart; when two contradict, the
one with the newer evidence absorbs the other, whose evidence is kept as superseded.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import numpy as np
from numpy.typing import NDArray

from engine.consolidation.candidates import near_observations
from engine.consolidation.claims import Claim
from engine.consolidation.relations import relate
from engine.consolidation.store import Stance, Trends, absorb_observation
from engine.consolidation.thresholds import MERGE_SIMILARITY
from engine.db import Connection

# Observations compared after each change; more than one duplicate at once is rare.
MERGE_CANDIDATES = 5


@dataclass(frozen=True)
class Current:
    """The observation just created or revised."""

    id: str
    text: str
    scope: list[str]
    embedding: NDArray[np.float32]
    claim: Claim | None
    event_at: datetime  # its newest supporting evidence
    created_at: datetime


async def merge_near_duplicates(
    conn: Connection,
    bank_id: str,
    current: Current,
    as_of: datetime,
    *,
    trends: Trends | None = None,
) -> tuple[str, list[str]]:
    """Fold near-duplicates of `current` together; returns the surviving id and the ids of
    the observations absorbed."""
    absorbed: list[str] = []
    others = await near_observations(
        conn,
        bank_id,
        current.scope,
        current.embedding,
        current.claim,
        exclude=current.id,
        floor=MERGE_SIMILARITY,
        limit=MERGE_CANDIDATES,
    )
    for other in others:
        relation = relate(
            other.claim,
            other.text,
            current.claim,
            current.text,
            other.similarity,
            MERGE_SIMILARITY,
        )
        if relation.kind == "unrelated":
            continue
        if relation.kind == "contradicts":
            newer_is_current = current.event_at >= other.event_at
            keep, drop = (current.id, other.id) if newer_is_current else (other.id, current.id)
            reason = f"superseded by a contradicting observation ({relation.reason})"
            stance: Stance | None = "superseded"
        else:
            older_is_current = (current.created_at, current.id) <= (other.created_at, other.id)
            keep, drop = (current.id, other.id) if older_is_current else (other.id, current.id)
            reason = f"near-duplicate (cosine {other.similarity:.3f})"
            stance = None
        await absorb_observation(
            conn, bank_id, keep, drop, reason=reason, stance=stance, as_of=as_of, trends=trends
        )
        absorbed.append(drop)
        if keep != current.id:
            return keep, absorbed  # `current` is gone into an older observation
    return current.id, absorbed
