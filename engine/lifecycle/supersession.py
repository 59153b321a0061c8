"""Supersession: a newer fact replaces an older one about the same subject and attribute.

The older fact keeps its text; it gets `valid_to` = the newer fact's start (its valid_from),
state 'superseded' and `superseded_by` = the newer fact, and both record the change in
memory_versions. Nothing is deleted, so `as_of` can still answer with the older fact.
Detection is in engine/lifecycle/detect.py (local rules) and engine/lifecycle/llm_detect.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.db import Connection
from engine.errors import InvalidInput, NotFound
from engine.lifecycle.versions import record_version

_PAIR = """
SELECT id::text AS id, text, state, coalesce(valid_from, created_at) AS start, fact_type
FROM memory_units WHERE bank_id = $1 AND id = ANY($2::uuid[])
FOR UPDATE
"""

_SUPERSEDE = """
UPDATE memory_units SET state = 'superseded', valid_to = $3, superseded_by = $2,
                        updated_at = now()
WHERE id = $1
"""


@dataclass(frozen=True)
class Supersession:
    old_id: str
    new_id: str
    reason: str


async def supersede(conn: Connection, bank_id: str, change: Supersession) -> bool:
    """Apply one supersession; False when it no longer applies (either fact gone, the old
    one already superseded, or the "new" one older). Run inside the caller's transaction."""
    if change.old_id == change.new_id:
        raise InvalidInput("superseded_by", "a fact cannot supersede itself")
    rows = {r["id"]: r for r in await conn.fetch(_PAIR, bank_id, [change.old_id, change.new_id])}
    old, new = rows.get(change.old_id), rows.get(change.new_id)
    if old is None or new is None:
        raise NotFound("memory", change.old_id if old is None else change.new_id)
    if old["state"] == "superseded" or new["start"] < old["start"]:
        return False
    await conn.execute(_SUPERSEDE, change.old_id, change.new_id, new["start"])
    await record_version(
        conn,
        bank_id,
        change.old_id,
        "superseded",
        previous={"state": old["state"]},
        reason=change.reason,
        related_id=change.new_id,
    )
    await record_version(
        conn, bank_id, change.new_id, "supersedes", reason=change.reason, related_id=change.old_id
    )
    return True
