"""The scheduled lifecycle of one bank, in batches (LifecycleWorkflow runs them).

Each batch takes the next `size` active or archived memories by id after `after_id` and, in
one transaction:
1. folds the accesses recall recorded beside its facts since the last run into them
   (engine/lifecycle/access_state.py), for every fact in its range of ids whatever its state,
   so decay, archiving, merging and deletion read the reinforced values, and (in the same
   row version) decays strength:  strength ← strength · rate^(days · f), days since it was
   last decayed,
   else since it entered the memory (stored, or said if that is later: chat history from
   2023 imported today starts fresh today; a clock from its 2023 dates had the first nightly
   run archive almost all of it), and records `decayed_at = now` — a retried
   batch at the same `now` decays by rate^0, so batches are idempotent. With the policy's
   `importance_scaled_decay` (the default) the clock runs at

       f = (1 − importance) / (1 − 0.4)

   (0.4 is the local extractor's neutral importance, engine/lifecycle/importance.py): a
   neutral fact decays at `rate`, small talk (0.2) 1.33× as fast, a preference or an
   identity fact (0.6–0.7) at 0.67–0.5×, a fact of importance 1 not at all — the
   half-life grows with importance, as in Ebbinghaus-style memories where a stronger trace
   fades slower. At 0.99/day and archive threshold 0.1: small talk (0.2) is archived after
   ~52 days untouched, a neutral fact (0.45) after ~163, an identity fact (0.6) after ~267,
   a decision (0.7) after ~387 (docs/benchmarks.md, bench/lifecycle.py). Without it f = 1;
2. archives active facts whose strength fell below the threshold — except, with the
   policy's `keep_current_values` (the default), a fact that states the current value of an
   attribute (engine/lifecycle/detect.py's claims: employer, residence, a favourite, answer
   style …): it is still active, so nothing superseded it, and archiving it would leave the
   subject with no value at all; its strength still decays — and observations whose
   every supporting fact is now archived; an observation left with some active evidence is
   retracted and that evidence marked for consolidation (the workflow then asks for one),
   and mental models citing an archived or deleted fact are named for a refresh;
3. merges near-duplicates: an active fact whose nearest active fact (cosine ≥ the policy's
   similarity, default 0.95) names the same entities and has compatible dates (both undated,
   or starting within a day) is absorbed: the older fact survives with the proof count,
   access count and evidence of both and the higher importance and strength; the absorbed
   one is archived with `superseded_by` = the survivor (nothing is deleted);
4. optionally (policy.delete_archived, off by default) deletes archived facts not accessed
   for `delete_after_days` whose importance is below `delete_below_importance`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from engine.consolidation.store import retract_observation
from engine.db import Connection
from engine.lifecycle.access_state import fold, fold_range, folding, id_range
from engine.lifecycle.detect import claim_of
from engine.lifecycle.importance import BASE as NEUTRAL_IMPORTANCE
from engine.lifecycle.payloads import BATCH_SIZE
from engine.lifecycle.policy import LifecyclePolicy
from engine.store.backlog import requeue

_BATCH = """
SELECT id FROM memory_units
WHERE bank_id = $1 AND state IN ('active', 'archived') AND ($2::uuid IS NULL OR id > $2)
ORDER BY id LIMIT $3
FOR UPDATE
"""

# Recall's accesses recorded beside the facts of the batch's range of ids (whatever their
# state; engine/lifecycle/access_state.py) are folded in and the due facts decayed in one
# row version each: folding first and decaying after, a fact accessed since the last run
# would be written twice, and on a page with room for one more version the second would go
# through every index, HNSW included. Side rows a flush holds are left for the next run.
FOLD_AND_DECAY_SQL = f"""
WITH {folding("$1", id_range("$7", "$8"))}, due AS (
    SELECT id FROM memory_units
    WHERE bank_id = $1 AND id = ANY($2::uuid[]) AND state = 'active'
      AND coalesce(decayed_at, greatest(mentioned_at, created_at)) < $4
), changed AS (
    UPDATE memory_units m SET
        access_count = m.access_count + coalesce(f.accesses, 0),
        last_accessed_at = greatest(m.last_accessed_at, f.last_accessed_at),
        strength = coalesce(1 - (1 - m.strength) * f.keep, m.strength) * CASE
            WHEN d.id IS NULL THEN 1
            ELSE power($3::float8, greatest(0, extract(epoch FROM ($4::timestamptz
                - coalesce(m.decayed_at, greatest(m.mentioned_at, m.created_at)))) / 86400.0)
                * CASE WHEN $5 THEN greatest(0, 1 - m.importance) / (1 - $6::float8) ELSE 1 END)
            END,
        decayed_at = CASE WHEN d.id IS NULL THEN m.decayed_at
                          ELSE greatest(coalesce(m.decayed_at, $4), $4) END
    FROM (SELECT id FROM due UNION SELECT fact_id FROM folded) s
    LEFT JOIN folded f ON f.fact_id = s.id
    LEFT JOIN due d ON d.id = s.id
    WHERE m.bank_id = $1 AND m.id = s.id
    RETURNING d.id IS NOT NULL AS decayed
)
SELECT count(*) FILTER (WHERE decayed) FROM changed
"""

# Facts the archive step would take: those stating an attribute's current value are kept.
_WEAK = """
SELECT id, text FROM memory_units
WHERE bank_id = $1 AND id = ANY($2::uuid[]) AND state = 'active' AND strength < $3
  AND fact_type <> 'observation'
"""

_ARCHIVE = """
WITH archived AS (
    UPDATE memory_units SET state = 'archived', updated_at = now()
    WHERE bank_id = $1 AND id = ANY($2::uuid[]) AND state = 'active' AND strength < $3
      AND fact_type <> 'observation' AND id <> ALL($4::uuid[])
    RETURNING id, strength
), recorded AS (
    INSERT INTO memory_versions (bank_id, memory_id, change, previous, reason)
    SELECT $1, id, 'archived', jsonb_build_object('state', 'active'),
           'strength ' || round(strength::numeric, 3) || ' below ' || $3
    FROM archived
)
SELECT coalesce(array_agg(id::text), '{}') FROM archived
"""

# Observations none of whose supporting facts is active any more.
_ARCHIVE_OBSERVATIONS = """
UPDATE memory_units o SET state = 'archived', updated_at = now()
WHERE o.bank_id = $1 AND o.fact_type = 'observation' AND o.state = 'active'
  AND EXISTS (SELECT 1 FROM observation_evidence e WHERE e.observation_id = o.id
              AND e.stance = 'supports' AND e.fact_id = ANY($2::uuid[]))
  AND NOT EXISTS (SELECT 1 FROM observation_evidence e JOIN memory_units f ON f.id = e.fact_id
                  WHERE e.observation_id = o.id AND e.stance = 'supports'
                    AND f.state = 'active')
"""

# Active observations resting partly on facts that are no longer active: retracted, and
# their remaining evidence consolidated again, so consolidation rebuilds them from what is
# left (those resting on no active fact were archived above).
_PARTLY_SUPPORTED = """
SELECT o.id::text AS id,
       array_agg(DISTINCT e.fact_id::text) FILTER (WHERE f.state <> 'active') AS lost,
       array_agg(DISTINCT e.fact_id::text) FILTER (WHERE f.state = 'active') AS kept
FROM memory_units o
JOIN observation_evidence e ON e.observation_id = o.id AND e.stance = 'supports'
JOIN memory_units f ON f.id = e.fact_id
WHERE o.bank_id = $1 AND o.fact_type = 'observation' AND o.state = 'active'
  AND o.id IN (SELECT observation_id FROM observation_evidence WHERE fact_id = ANY($2::uuid[]))
GROUP BY o.id
HAVING bool_or(f.state <> 'active') AND bool_or(f.state = 'active')
"""

# Mental models citing facts this batch archived or deleted: refreshed after the run.
_MODELS_CITING = """
SELECT id FROM mental_models WHERE bank_id = $1 AND based_on_ids && $2::uuid[] ORDER BY id
"""

_CANDIDATES = """
SELECT m.id::text AS id, m.embedding, m.occurred_start, m.created_at,
       coalesce(array(SELECT entity_id::text FROM unit_entities ue WHERE ue.unit_id = m.id
                      ORDER BY entity_id), '{}') AS entities
FROM memory_units m
WHERE m.bank_id = $1 AND m.id = ANY($2::uuid[]) AND m.state = 'active'
  AND m.fact_type <> 'observation'
ORDER BY m.id
"""

_NEAREST = """
SELECT m.id::text AS id, 1 - (m.embedding <=> $3) AS similarity, m.occurred_start,
       m.created_at,
       coalesce(array(SELECT entity_id::text FROM unit_entities ue WHERE ue.unit_id = m.id
                      ORDER BY entity_id), '{}') AS entities
FROM memory_units m
WHERE m.bank_id = $1 AND m.id <> $2 AND m.state = 'active' AND m.fact_type <> 'observation'
ORDER BY m.embedding <=> $3 LIMIT 3
"""

_ABSORB = """
WITH absorbed AS (
    UPDATE memory_units SET state = 'archived', superseded_by = $2, updated_at = now()
    WHERE id = $3 AND state = 'active'
    RETURNING proof_count, access_count, importance, strength, text
), survivor AS (
    UPDATE memory_units s SET proof_count = s.proof_count + a.proof_count,
        access_count = s.access_count + a.access_count,
        importance = greatest(s.importance, a.importance),
        strength = greatest(s.strength, a.strength), updated_at = now()
    FROM absorbed a WHERE s.id = $2
    RETURNING s.id
), evidence AS (
    INSERT INTO observation_evidence (observation_id, fact_id, bank_id, quote, stance,
                                      evidence_at)
    SELECT observation_id, $2, bank_id, quote, stance, evidence_at
    FROM observation_evidence WHERE fact_id = $3
    ON CONFLICT DO NOTHING
), recorded AS (
    INSERT INTO memory_versions (bank_id, memory_id, change, previous_text, reason, related_id)
    SELECT $1, $2, 'merged', a.text, 'near-duplicate absorbed', $3 FROM absorbed a
    UNION ALL
    SELECT $1, $3, 'merged', NULL, 'absorbed as a near-duplicate', $2 FROM absorbed a
)
SELECT count(*) FROM survivor
"""

_DELETE = """
WITH gone AS (
    DELETE FROM memory_units
    WHERE bank_id = $1 AND id = ANY($2::uuid[]) AND state = 'archived'
      AND importance < $3 AND coalesce(last_accessed_at, greatest(mentioned_at, created_at)) < $4
    RETURNING id
)
SELECT coalesce(array_agg(id), '{}') FROM gone
"""


@dataclass(frozen=True)
class BatchCounts:
    scanned: int = 0
    decayed: int = 0
    archived: int = 0
    merged: int = 0
    deleted: int = 0
    last_id: str | None = None
    observations_retracted: int = 0
    models: tuple[str, ...] = ()  # mental models citing facts archived or deleted

    def to_json(self) -> dict[str, Any]:
        return {
            "scanned": self.scanned,
            "decayed": self.decayed,
            "archived": self.archived,
            "merged": self.merged,
            "deleted": self.deleted,
        }


def _compatible(a: datetime | None, b: datetime | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return abs(a - b) <= timedelta(days=1)


async def run_batch(
    conn: Connection,
    bank_id: str,
    policy: LifecyclePolicy,
    now: datetime,
    after_id: str | None,
    size: int = BATCH_SIZE,
) -> BatchCounts:
    """One batch in one transaction; `last_id` None when the bank is done."""
    async with conn.transaction():
        ids = [r["id"] for r in await conn.fetch(_BATCH, bank_id, after_id, size)]
        if not ids:
            await fold_range(conn, bank_id, after_id, None)  # the rest of the id space
            return BatchCounts()
        # the last batch (a short one) folds every id after its first
        upto = str(ids[-1]) if len(ids) == size else None
        decayed = await conn.fetchval(
            FOLD_AND_DECAY_SQL,
            bank_id,
            ids,
            policy.decay_rate,
            now,
            policy.importance_scaled_decay,
            NEUTRAL_IMPORTANCE,
            after_id,
            upto,
        )
        kept = await _current_values(conn, bank_id, ids, policy)
        archived_ids = list(
            await conn.fetchval(_ARCHIVE, bank_id, ids, policy.archive_threshold, kept)
        )
        archived, retracted = len(archived_ids), 0
        if archived_ids:
            await conn.execute(_ARCHIVE_OBSERVATIONS, bank_id, ids)
            retracted = await _retract_partly_supported(conn, bank_id, archived_ids)
        merged = await _merge(conn, bank_id, ids, policy) if policy.merge_duplicates else 0
        deleted = 0
        if policy.delete_archived:
            cutoff = now - timedelta(days=policy.delete_after_days)
            gone = await conn.fetchval(
                _DELETE, bank_id, ids, policy.delete_below_importance, cutoff
            )
            deleted = len(gone)
            archived_ids += [str(g) for g in gone]
            if deleted:
                await conn.execute(
                    "DELETE FROM bank_term_stats WHERE bank_id = $1 AND df <= 0", bank_id
                )
                await conn.execute(
                    "DELETE FROM entities e WHERE e.bank_id = $1 AND NOT EXISTS"
                    " (SELECT 1 FROM unit_entities ue WHERE ue.entity_id = e.id)",
                    bank_id,
                )
        models = (
            [r["id"] for r in await conn.fetch(_MODELS_CITING, bank_id, archived_ids)]
            if archived_ids
            else []
        )
        return BatchCounts(
            scanned=len(ids),
            decayed=int(decayed),
            archived=archived,
            merged=merged,
            deleted=deleted,
            last_id=str(ids[-1]),
            observations_retracted=retracted,
            models=tuple(models),
        )


async def _current_values(
    conn: Connection, bank_id: str, ids: list[Any], policy: LifecyclePolicy
) -> list[Any]:
    """Weak facts that state an attribute's current value (kept by `keep_current_values`)."""
    if not policy.keep_current_values:
        return []
    rows = await conn.fetch(_WEAK, bank_id, ids, policy.archive_threshold)
    return [r["id"] for r in rows if claim_of(r["text"]) is not None]


async def _retract_partly_supported(conn: Connection, bank_id: str, archived: list[str]) -> int:
    """Observations that lost some of their evidence to archiving are retracted (their history
    says why) and rebuilt by the next consolidation from the evidence still active."""
    rows = await conn.fetch(_PARTLY_SUPPORTED, bank_id, archived)
    for row in rows:
        await requeue(conn, bank_id, list(row["kept"]))
        await retract_observation(
            conn,
            bank_id,
            row["id"],
            reason="evidence archived by the lifecycle",
            fact_ids=list(row["lost"]),
        )
    return len(rows)


async def _merge(conn: Connection, bank_id: str, ids: list[Any], policy: LifecyclePolicy) -> int:
    merged = 0
    gone: set[str] = set()
    for row in await conn.fetch(_CANDIDATES, bank_id, ids):
        if row["id"] in gone:
            continue
        for near in await conn.fetch(_NEAREST, bank_id, row["id"], row["embedding"]):
            if near["similarity"] < policy.merge_similarity:
                break
            if near["id"] in gone or list(near["entities"]) != list(row["entities"]):
                continue
            if not _compatible(row["occurred_start"], near["occurred_start"]):
                continue
            # The older one survives (it has been recalled and linked longer).
            first, second = sorted(
                [(row["created_at"], row["id"]), (near["created_at"], near["id"])]
            )
            # the survivor may lie outside this batch's range (not folded yet)
            await fold(conn, bank_id, [first[1], second[1]])
            if await conn.fetchval(_ABSORB, bank_id, first[1], second[1]):
                merged += 1
                gone.add(second[1])
            break
    return merged
