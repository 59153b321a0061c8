"""The freshness trend of an observation, from when its supporting evidence happened.

With evidence times t_1 <= ... <= t_n, the gaps between them, and a reference time T (the
newest fact the bank has consolidated; now, when read):
    stale          T - t_n > STALE_AFTER: nothing has supported it for half a year
    new            n = 1
    weakening      the silence since t_n is more than SILENCE times the mean gap, or the
                   later gaps are more than PACE times the earlier ones (evidence slows down)
    strengthening  the later gaps are less than 1/PACE of the earlier ones (it speeds up)
    stable         otherwise (evenly spaced evidence, or two pieces)
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from itertools import pairwise
from typing import Literal

Trend = Literal["new", "strengthening", "stable", "weakening", "stale"]

STALE_AFTER = timedelta(days=180)
SILENCE = 3.0
PACE = 1.5


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def freshness_trend(evidence_at: Sequence[datetime], as_of: datetime) -> Trend:
    times = sorted(evidence_at)
    if not times:
        return "stale"
    silence = max(as_of - times[-1], timedelta(0))
    if silence > STALE_AFTER:
        return "stale"
    if len(times) == 1:
        return "new"
    gaps = [(b - a).total_seconds() for a, b in pairwise(times)]
    mean_gap = _mean(gaps)
    if mean_gap > 0 and silence.total_seconds() > SILENCE * mean_gap:
        return "weakening"
    if len(gaps) < 2:
        return "stable"
    half = len(gaps) // 2
    earlier, later = _mean(gaps[:half]), _mean(gaps[len(gaps) - half :])
    if later > earlier * PACE:
        return "weakening"
    if later * PACE < earlier:
        return "strengthening"
    return "stable"
