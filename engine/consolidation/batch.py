"""One bounded step of a bank's consolidation, atomic: whatever it did to observations commits
together with taking its facts off the backlog (engine/store/backlog.py), so a crash before
the commit leaves every fact waiting; nothing is skipped or repeated. The step's result
commits with it too, under (operation, position): a retry after the commit answers with it
rather than taking the next facts, so the operation's totals stay exact.

A transaction-level advisory lock per bank serialises steps even outside the workflow's
one-run-per-bank guarantee. The last step of a backlog also repairs observations whose
evidence was deleted with its documents (a new proof count, or retraction when none is left).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from engine.consolidation.candidates import PendingFact, backlog, pending_facts, still_pending
from engine.consolidation.encode import TextEncoder
from engine.consolidation.llm import LLMBatch, Proposals, prepare_batch
from engine.consolidation.local import LocalConsolidator, Tally
from engine.consolidation.payloads import BatchResult, ConsolidationCounts
from engine.consolidation.store import mark_consolidated, refresh_observation, retract_observation
from engine.consolidation.validate import apply_group, existing_observations
from engine.db import Connection, Pool
from engine.errors import NotFound
from engine.store.banks import Bank, get_bank
from engine.store.document_history import record_consolidation
from engine.store.locks import consolidation_lock

_STATE = """
INSERT INTO consolidation_state AS s (bank_id, last_consolidated_at, facts_consolidated,
                                      last_operation_id)
VALUES ($1, now(), $2, $3)
ON CONFLICT (bank_id) DO UPDATE
SET last_consolidated_at = now(),
    facts_consolidated = s.facts_consolidated + EXCLUDED.facts_consolidated,
    last_operation_id = EXCLUDED.last_operation_id
"""
_RECORDED = "SELECT result FROM consolidation_batches WHERE operation_id = $1 AND seq = $2"
_RECORD = """
INSERT INTO consolidation_batches (operation_id, seq, bank_id, result) VALUES ($1, $2, $3, $4)
"""
_FORGET = "DELETE FROM consolidation_batches WHERE operation_id = $1"
_DRIFTED = """
SELECT o.observation_id::text AS id, s.n FROM observations o
JOIN memory_units m ON m.id = o.observation_id
CROSS JOIN LATERAL (SELECT count(*)::int AS n FROM observation_evidence e
                    WHERE e.observation_id = o.observation_id AND e.stance = 'supports') s
WHERE o.bank_id = $1 AND m.proof_count <> s.n
ORDER BY o.observation_id
"""


async def recorded_batch(
    conn: Connection, bank_id: str, operation_id: str, seq: int
) -> BatchResult | None:
    """The result a batch committed already (its activity failed after the commit)."""
    if seq < 0:
        return None
    row = await conn.fetchval(_RECORDED, operation_id, seq)
    if row is None:
        return None
    return BatchResult(
        ConsolidationCounts.from_dict(row["counts"]),
        await backlog(conn, bank_id),
        mode=str(row["mode"]),
        rejections=[str(r) for r in row["rejections"]],
    )


async def _record(
    conn: Connection, bank_id: str, operation_id: str, seq: int, result: BatchResult
) -> None:
    if seq >= 0:
        await conn.execute(
            _RECORD,
            operation_id,
            seq,
            bank_id,
            {
                "counts": result.counts.as_dict(),
                "mode": result.mode,
                "rejections": result.rejections,
            },
        )


async def forget_batches(conn: Connection, operation_id: str) -> None:
    """A finished operation's batches are not retried any more."""
    await conn.execute(_FORGET, operation_id)


async def consolidation_bank(conn: Connection, bank_id: str) -> Bank | None:
    """The bank if it exists and wants observations."""
    try:
        bank = await get_bank(conn, bank_id)
    except NotFound:
        return None
    return bank if bank.config.enable_observations else None


def _as_of(facts: Sequence[PendingFact]) -> datetime:
    """Freshness is judged against the newest fact consolidated, so that a bank of old
    conversations is not all stale."""
    return max((f.event_at for f in facts), default=datetime.now(UTC))


async def repair_observations(conn: Connection, bank_id: str, as_of: datetime) -> int:
    """Observations whose supporting facts changed outside consolidation (a document deleted
    or replaced): new proof counts, and retraction of those with no support left. Returns
    how many were retracted."""
    retracted = 0
    for row in await conn.fetch(_DRIFTED, bank_id):
        if row["n"] == 0:
            await retract_observation(
                conn,
                bank_id,
                row["id"],
                reason="its supporting facts were deleted",
                fact_ids=[],
            )
            retracted += 1
        else:
            await refresh_observation(conn, bank_id, row["id"], as_of)
    return retracted


async def _finish(
    conn: Connection,
    bank_id: str,
    operation_id: str,
    tally: Tally,
    fact_ids: Sequence[str],
    as_of: datetime,
) -> int:
    await record_consolidation(conn, bank_id, operation_id, fact_ids)
    remaining = await backlog(conn, bank_id)
    if remaining == 0:
        tally.retracted += await repair_observations(conn, bank_id, as_of)
    await conn.execute(_STATE, bank_id, len(fact_ids), operation_id)
    return remaining


async def consolidate_local_batch(
    conn: Connection,
    bank_id: str,
    operation_id: str,
    limit: int,
    encoder: TextEncoder,
    seq: int = -1,
    *,
    side: Pool | None = None,
) -> BatchResult:
    """One local batch in one transaction on `conn`; the batch's candidates are read on a
    connection of `side` too when it has one to spare (prefetch.py)."""
    async with conn.transaction():
        await consolidation_lock(conn, bank_id)
        done = await recorded_batch(conn, bank_id, operation_id, seq)
        if done is not None:
            return done
        if await consolidation_bank(conn, bank_id) is None:
            return BatchResult(ConsolidationCounts(), await backlog(conn, bank_id), enabled=False)
        facts = await pending_facts(conn, bank_id, limit, lock=True)
        as_of = _as_of(facts)
        consolidator = LocalConsolidator(conn, bank_id, encoder, as_of, side=side)
        tally = await consolidator.consolidate(facts)
        remaining = await _finish(conn, bank_id, operation_id, tally, [f.id for f in facts], as_of)
        result = BatchResult(tally.counts(len(facts)), remaining, mode="local")
        await _record(conn, bank_id, operation_id, seq, result)
    return result


async def prepare_llm_batch(conn: Connection, bank_id: str, limit: int) -> LLMBatch | None:
    """What the model is shown (read without locks: the model call happens outside any
    transaction); None when the bank is gone or has observations turned off."""
    bank = await consolidation_bank(conn, bank_id)
    if bank is None:
        return None
    return await prepare_batch(conn, bank_id, bank.mission, limit)


async def apply_llm_batch(
    conn: Connection,
    batch: LLMBatch,
    proposals: Sequence[Proposals],
    operation_id: str,
    encoder: TextEncoder,
    seq: int = -1,
) -> BatchResult:
    """Validate and apply the model's proposals for `batch` (one per group) and take its
    facts off the backlog, in one transaction. Facts that another step consolidated or a
    retain deleted meanwhile are left out."""
    bank_id = batch.bank_id
    facts = [f for g in batch.groups for f in g.facts]
    as_of = _as_of(facts)
    tally = Tally()
    rejections: list[str] = []
    async with conn.transaction():
        await consolidation_lock(conn, bank_id)
        done = await recorded_batch(conn, bank_id, operation_id, seq)
        if done is not None:
            return done
        if await consolidation_bank(conn, bank_id) is None:
            return BatchResult(ConsolidationCounts(), await backlog(conn, bank_id), enabled=False)
        pending = await still_pending(conn, bank_id, batch.fact_ids)
        shown = [o.id for g in batch.groups for o in g.observations]
        existing = await existing_observations(conn, bank_id, shown)
        for group, proposed in zip(batch.groups, proposals, strict=True):
            await apply_group(
                conn,
                bank_id,
                group,
                proposed,
                pending=pending,
                existing=existing,
                encoder=encoder,
                as_of=as_of,
                tally=tally,
                rejections=rejections,
            )
        await mark_consolidated(conn, sorted(pending))
        remaining = await _finish(conn, bank_id, operation_id, tally, sorted(pending), as_of)
        result = BatchResult(
            tally.counts(len(pending)), remaining, mode="llm", rejections=rejections
        )
        await _record(conn, bank_id, operation_id, seq, result)
    return result
