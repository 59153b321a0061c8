"""The request's filters (bank, fact types, tags) as SQL shared by every arm.

Each arm's statement binds bank as $1, types as $2 and tags as $3, so one helper writes the
same WHERE clause for all of them; only the tag mode changes the text (five variants).
"""

from __future__ import annotations

from engine.recall.types import FACT_TYPES, RecallRequest
from engine.store.memories import TagsMatch, tags_clause


def filter_sql(alias: str, tags_match: TagsMatch) -> str:
    """`alias.bank_id = $1 AND alias.fact_type = ANY($2) AND <tags on $3>`."""
    return f"{alias}.bank_id = $1 AND {alias}.fact_type = ANY($2::text[]) AND " + tags_clause(
        f"{alias}.tags", "$3::text[]", tags_match
    )


def filter_args(request: RecallRequest) -> tuple[str, list[str], list[str]]:
    """The values for $1, $2, $3."""
    return request.bank_id, list(request.types or FACT_TYPES), list(request.tags)
