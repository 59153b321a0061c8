"""An explicit time window is a constraint on the ranking, not a hint.

When the query names a time ("last spring", "去年春天") or the request gives
`temporal_window`, every fact dated inside the window is ranked before every fact dated
outside it; facts with no date at all sit between (nothing says they are outside). Within
each group the order of fusion and rerank stands, diversified by MMR within the group
(engine/recall/mmr.py). Nothing is dropped: a question about
"last spring" that only December answers still gets December, after what spring holds.

A fact's date is the one the temporal arm searches by (engine/recall/temporal.py): its
occurred range when it has one (inside when the range overlaps the window), else the moment
it was mentioned. Why: the proximity boost of engine/recall/scoring.py (0.5 for a fact
inside) is a hint the MaxSim rerank can outvote — with facts of March, April, October and
December 2024 about Alice's activities, "What did Alice do last spring?" put December first.

Which queries get a window at all is the date parser's business (engine/dates): a query
without a real time expression gets none, and then this stage changes nothing.
"""

from __future__ import annotations

from typing import Literal

from engine.recall.types import CandidateRow, TimeWindow

Placement = Literal["inside", "undated", "outside"]
_TIER: dict[Placement, int] = {"inside": 0, "undated": 1, "outside": 2}


def placement(row: CandidateRow, window: TimeWindow) -> Placement:
    """Where the fact's date falls against the half-open window [start, end)."""
    if row.occurred_start is not None:
        end = row.occurred_end or row.occurred_start
        inside = row.occurred_start < window.end and end >= window.start
        return "inside" if inside else "outside"
    if row.mentioned_at is not None:
        inside = window.start <= row.mentioned_at < window.end
        return "inside" if inside else "outside"
    return "undated"


def window_tier(row: CandidateRow, window: TimeWindow | None) -> int:
    """0 inside the window, 1 undated, 2 outside; 0 for every fact without a window."""
    return 0 if window is None else _TIER[placement(row, window)]
