"""The request's filters (bank, fact types, tags, lifecycle state) as SQL shared by every arm.

Each arm's statement binds bank as $1, types as $2 and tags as $3, so one helper writes the
same WHERE clause for all of them; only the tag mode and the visible lifecycle states change
the text. States are spelled into the SQL from the fixed set below, never from input: by
default only active facts are searched (docs/lifecycle.md); `include_archived` and
`include_superseded` widen it, and `as_of` searches every state, the rows then filtered by
their validity at that time (engine/recall/lifecycle.py).
"""

from __future__ import annotations

from engine.recall.types import FACT_TYPES, RecallRequest
from engine.store.memories import TagsMatch, tags_clause

LIFECYCLE_STATES = ("active", "archived", "superseded")
ACTIVE: tuple[str, ...] = ("active",)


def visible_states(request: RecallRequest) -> tuple[str, ...]:
    if request.as_of is not None:
        return LIFECYCLE_STATES
    states = ["active"]
    if request.include_archived:
        states.append("archived")
    if request.include_superseded:
        states.append("superseded")
    return tuple(states)


def state_clause(alias: str, states: tuple[str, ...]) -> str:
    if set(states) >= set(LIFECYCLE_STATES):
        return ""
    unknown = set(states) - set(LIFECYCLE_STATES)
    if unknown or not states:
        raise ValueError(f"not lifecycle states: {sorted(unknown) or 'none'}")
    listed = ", ".join(f"'{s}'" for s in states)
    return f" AND {alias}.state IN ({listed})"


def filter_sql(alias: str, tags_match: TagsMatch, states: tuple[str, ...] = ACTIVE) -> str:
    """`alias.bank_id = $1 AND alias.fact_type = ANY($2) AND <tags on $3> AND <states>`."""
    return (
        f"{alias}.bank_id = $1 AND {alias}.fact_type = ANY($2::text[]) AND "
        + tags_clause(f"{alias}.tags", "$3::text[]", tags_match)
        + state_clause(alias, states)
    )


def filter_args(request: RecallRequest) -> tuple[str, list[str], list[str]]:
    """The values for $1, $2, $3."""
    return request.bank_id, list(request.types or FACT_TYPES), list(request.tags)
