"""What the lifecycle does when retain stores new facts (one call from the upsert step):
local supersession (engine/lifecycle/detect.py), and archived facts that the new ones
corroborate come back to active (new evidence reinforces them, docs/lifecycle.md)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from engine.db import Connection
from engine.lifecycle.detect import apply_local_supersession

# An archived fact is restored by a new fact at least this similar (cosine) that shares an
# entity with it (or, both naming none, in the same bank): a restatement, not a neighbour.
RESTORE_SIMILARITY = 0.85

_RESTORE = """
WITH restored AS (
    -- recall's pending accesses (engine/lifecycle/access_state.py) are folded in first, so
    -- the restored strength is at least the reinforced one
    UPDATE memory_units o SET
        state = 'active', updated_at = now(),
        strength = greatest(coalesce(1 - (1 - o.strength) * (SELECT keep FROM fact_access
                   WHERE bank_id = $1 AND fact_id = o.id), o.strength), o.importance),
        access_count = o.access_count + coalesce((SELECT accesses FROM fact_access
                       WHERE bank_id = $1 AND fact_id = o.id), 0),
        last_accessed_at = greatest(o.last_accessed_at, (SELECT last_accessed_at
                           FROM fact_access WHERE bank_id = $1 AND fact_id = o.id))
    -- not a merged-away duplicate (superseded_by set): its survivor holds its evidence, and
    -- restoring it would only have the next run merge it again
    WHERE o.bank_id = $1 AND o.state = 'archived' AND o.superseded_by IS NULL AND EXISTS (
        SELECT 1 FROM memory_units n
        WHERE n.id = ANY($2::uuid[]) AND n.bank_id = $1 AND n.id <> o.id
          AND 1 - (n.embedding <=> o.embedding) >= $3
          AND (EXISTS (SELECT 1 FROM unit_entities a JOIN unit_entities b
                       ON a.entity_id = b.entity_id WHERE a.unit_id = n.id AND b.unit_id = o.id)
               OR (NOT EXISTS (SELECT 1 FROM unit_entities a WHERE a.unit_id = n.id)
                   AND NOT EXISTS (SELECT 1 FROM unit_entities b WHERE b.unit_id = o.id))))
    RETURNING o.id
), folded AS (  -- in id order, as a flush takes them
    DELETE FROM fact_access f USING (
        SELECT fact_id FROM fact_access
        WHERE bank_id = $1 AND fact_id IN (SELECT id FROM restored)
        ORDER BY fact_id
        FOR UPDATE
    ) t
    WHERE f.bank_id = $1 AND f.fact_id = t.fact_id
)
INSERT INTO memory_versions (bank_id, memory_id, change, previous, reason)
SELECT $1, id, 'restored', '{"state": "archived"}'::jsonb, 'reinforced by new evidence'
FROM restored
RETURNING memory_id
"""


@dataclass(frozen=True)
class RetainEffects:
    superseded: int
    restored: int


async def lifecycle_after_store(
    conn: Connection, bank_id: str, new_ids: Sequence[str]
) -> RetainEffects:
    """Run in the transaction that stored `new_ids`."""
    ids = [str(i) for i in new_ids]
    if not ids:
        return RetainEffects(0, 0)
    restored = await conn.fetch(_RESTORE, bank_id, ids, RESTORE_SIMILARITY)
    applied = await apply_local_supersession(conn, bank_id, ids)
    return RetainEffects(len(applied), len(restored))
