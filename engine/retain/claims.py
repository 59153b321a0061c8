"""Per-document serialisation of writes: one writer per (bank, document) at a time.

A batch of the pipeline claims its documents before planning them and releases each in the
transaction that stores it. A document claimed by another open operation is queued in
`document_waiters`; its writer is told when the claim is released (the workflow signals the
waiters the release returns) and claims again. Waiters are served oldest first, so the writes
of one document apply in the order they queued and the last one wins. A claim whose operation
has ended or is gone (its workflow terminated, its bank deleted) is stale and taken over.

Claim and release take a transaction-level advisory lock per document, so a release always
sees a waiter that queued before it: no wake-up is lost. Locks are taken in document order.
"""

from __future__ import annotations

from engine.db import Connection

_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended('claim' || $1 || E'\\x1f' || $2, 0))"

_TERMINAL = "('completed', 'failed', 'cancelled')"

# The current holders, unless their operation has ended.
_HOLDERS = f"""
SELECT c.document_id, c.operation_id FROM document_claims c
LEFT JOIN operations o ON o.operation_id = c.operation_id
WHERE c.bank_id = $1 AND c.document_id = ANY($2::text[])
  AND o.status IS NOT NULL AND o.status NOT IN {_TERMINAL}
"""

# Documents with live waiters of other operations queued before this workflow (any, where it
# is not queued).
_AHEAD = f"""
SELECT DISTINCT w.document_id FROM document_waiters w
LEFT JOIN operations o ON o.operation_id = w.operation_id
LEFT JOIN document_waiters mine
       ON mine.bank_id = w.bank_id AND mine.document_id = w.document_id
      AND mine.workflow_id = $4
WHERE w.bank_id = $1 AND w.document_id = ANY($2::text[]) AND w.operation_id <> $3
  AND o.status IS NOT NULL AND o.status NOT IN {_TERMINAL}
  AND w.queued_at < coalesce(mine.queued_at, 'infinity')
"""

_TAKE = """
INSERT INTO document_claims (bank_id, document_id, operation_id, workflow_id)
SELECT $1, d, $3, $4 FROM unnest($2::text[]) AS d
ON CONFLICT (bank_id, document_id) DO UPDATE
SET operation_id = EXCLUDED.operation_id, workflow_id = EXCLUDED.workflow_id, claimed_at = now()
"""

_UNQUEUE = """
DELETE FROM document_waiters
WHERE bank_id = $1 AND document_id = ANY($2::text[]) AND workflow_id = $3
"""

_QUEUE = """
INSERT INTO document_waiters (bank_id, document_id, workflow_id, operation_id)
SELECT $1, d, $3, $4 FROM unnest($2::text[]) AS d ON CONFLICT DO NOTHING
"""

_RELEASE = """
DELETE FROM document_claims WHERE bank_id = $1 AND document_id = $2 AND operation_id = $3
"""

_WAITERS = "SELECT workflow_id FROM document_waiters WHERE bank_id = $1 AND document_id = $2"

_HELD_BY = """
SELECT document_id FROM document_claims
WHERE bank_id = $1 AND operation_id = $2 AND document_id = ANY($3::text[])
"""

# Claim locks of many documents in one statement, in document order.
_LOCK_MANY = """
SELECT count(pg_advisory_xact_lock(hashtextextended('claim' || $1 || E'\\x1f' || d, 0)))
FROM (SELECT d FROM unnest($2::text[]) AS d ORDER BY d) ordered
"""

_RELEASE_MANY = """
DELETE FROM document_claims
WHERE bank_id = $1 AND operation_id = $2 AND document_id = ANY($3::text[])
"""

_WAITERS_MANY = """
SELECT DISTINCT workflow_id FROM document_waiters
WHERE bank_id = $1 AND document_id = ANY($2::text[])
"""


async def claim_documents(
    conn: Connection, bank_id: str, operation_id: str, workflow_id: str, document_ids: list[str]
) -> tuple[list[str], list[str]]:
    """(claimed, busy): busy documents are queued for `workflow_id` to be told of release."""
    documents = sorted(set(document_ids))
    async with conn.transaction():
        await conn.execute(_LOCK_MANY, bank_id, documents)
        holders = {
            r["document_id"]: r["operation_id"]
            for r in await conn.fetch(_HOLDERS, bank_id, documents)
        }
        ahead = {
            r["document_id"]
            for r in await conn.fetch(_AHEAD, bank_id, documents, operation_id, workflow_id)
        }
        claimed = [
            d for d in documents if holders.get(d, operation_id) == operation_id and d not in ahead
        ]
        busy = [d for d in documents if d not in set(claimed)]
        await conn.execute(_TAKE, bank_id, claimed, operation_id, workflow_id)
        await conn.execute(_UNQUEUE, bank_id, claimed, workflow_id)
        await conn.execute(_QUEUE, bank_id, busy, workflow_id, operation_id)
    return claimed, busy


async def lock_claims(conn: Connection, bank_id: str, document_ids: list[str]) -> None:
    """Hold the documents' claim locks to the end of the caller's transaction, so that no
    release of their claims (an operation ending) interleaves with it."""
    await conn.execute(_LOCK_MANY, bank_id, sorted(set(document_ids)))


async def held_claims(
    conn: Connection, bank_id: str, operation_id: str, document_ids: list[str]
) -> set[str]:
    """Which of the documents the operation still holds."""
    rows = await conn.fetch(_HELD_BY, bank_id, operation_id, document_ids)
    return {r["document_id"] for r in rows}


async def release_documents(
    conn: Connection, bank_id: str, operation_id: str, document_ids: list[str]
) -> list[str]:
    """Release inside the caller's transaction; returns the workflows waiting for them."""
    if not document_ids:
        return []
    await conn.execute(_LOCK_MANY, bank_id, document_ids)
    await conn.execute(_RELEASE_MANY, bank_id, operation_id, document_ids)
    return [r["workflow_id"] for r in await conn.fetch(_WAITERS_MANY, bank_id, document_ids)]


_CLAIMED_BY = """
SELECT bank_id, document_id FROM document_claims WHERE operation_id = $1
UNION
SELECT bank_id, document_id FROM document_waiters WHERE operation_id = $1
ORDER BY 1, 2
"""


async def release_operation(conn: Connection, operation_id: str) -> list[str]:
    """Release every claim and queue place of an operation that ended; returns the workflows
    of other operations waiting for those documents."""
    waiters: set[str] = set()
    async with conn.transaction():
        for row in await conn.fetch(_CLAIMED_BY, operation_id):
            bank_id, document_id = row["bank_id"], row["document_id"]
            await conn.execute(_LOCK, bank_id, document_id)
            await conn.execute(_RELEASE, bank_id, document_id, operation_id)
            await conn.execute(
                "DELETE FROM document_waiters WHERE bank_id = $1 AND document_id = $2"
                " AND operation_id = $3",
                bank_id,
                document_id,
                operation_id,
            )
            waiters.update(
                r["workflow_id"] for r in await conn.fetch(_WAITERS, bank_id, document_id)
            )
    return sorted(waiters)
