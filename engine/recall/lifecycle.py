"""What the lifecycle changes in recall: validity at a time, and current facts first.

A fact is valid at `t` when the memory knew it by then (`known_at`: mentioned, else stored),
it held by then (`valid_from`: when it happened or was said, whichever came first) and it was
not yet replaced (`valid_to` unset or after `t`). Without `as_of`, the
reference time is now, so a superseded fact (valid_to set when its successor arrived) is
"not current" and, when `include_superseded` brings it in, is placed after every current one.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from engine.recall.types import CandidateRow


def valid_at(row: CandidateRow, when: datetime) -> bool:
    if row.known_at is not None and row.known_at > when:
        return False
    if row.valid_from is not None and row.valid_from > when:
        return False
    return row.valid_to is None or row.valid_to > when


def is_current(row: CandidateRow, when: datetime, *, as_of: bool = False) -> bool:
    """Whether the fact ranks among the current ones (the engine places the others after
    them, keeping each group's order).

    With `as_of`, "current" is "valid then" alone: `state` says what the fact is *now*, so a
    fact superseded later was still the current one at `as_of`. Demoting it for its present
    state put every answer to a history question behind the unrelated facts of that time
    (bench/lifecycle.py's `as_of` recall@10 was 0.11 for this; docs/benchmarks.md)."""
    return valid_at(row, when) and (as_of or row.state != "superseded")


def visible_as_of(rows: Sequence[CandidateRow], when: datetime) -> list[CandidateRow]:
    return [r for r in rows if valid_at(r, when)]
