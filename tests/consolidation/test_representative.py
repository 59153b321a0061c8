"""The statement a local observation is written in: the cluster's medoid, ties to the
shortest statement, then the oldest."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np

from engine.consolidation.local import _Member, representative

T0 = datetime(2024, 5, 1, tzinfo=UTC)


def member(text: str, vector: list[float], age_days: int = 0) -> _Member:
    unit = np.asarray(vector, dtype=np.float32)
    unit /= np.linalg.norm(unit)
    at = T0 - timedelta(days=age_days)
    return _Member(text, text, unit, at, at)


def test_two_statements_tie_and_the_shorter_one_is_kept() -> None:
    # Two members are equally similar to each other; whatever float noise their vectors
    # carry, the shorter statement is chosen, in either order.
    for wobble in (1e-7, -1e-7, 3e-6, -3e-6):
        long = member("Alice prefers tea after lunch.", [1.0, 0.3 + wobble, 0.0])
        short = member("Alice prefers tea.", [1.0, 0.0, 0.2])
        assert representative([long, short]).text == "Alice prefers tea."
        assert representative([short, long]).text == "Alice prefers tea."


def test_the_medoid_wins_over_a_shorter_outlier() -> None:
    centre = member("Alice drinks green tea most afternoons.", [1.0, 0.0, 0.0])
    near = member("Alice drinks green tea.", [1.0, 0.4, 0.0])
    other = member("Alice likes tea.", [1.0, -0.2, 0.9])
    assert representative([near, other, centre]).text == centre.text


def test_equal_statements_go_to_the_oldest() -> None:
    newer = member("Alice prefers tea.", [1.0, 0.1, 0.0], age_days=1)
    older = member("Alice prefers tea!", [1.0, 0.0, 0.1], age_days=5)
    assert representative([newer, older]).text == "Alice prefers tea!"
