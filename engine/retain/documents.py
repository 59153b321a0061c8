"""Staged documents: a write's items and plans wait in PostgreSQL, not in workflow payloads.

A retain request's documents are staged in `retain_documents` before its workflow starts, an
import's in `import_documents` (engine/imports/staging.py); the pipeline's steps load them by
(operation, seq). Plans (new chunks with their text) go to `document_plans`. Everything an
operation staged is removed when it completes (`discard_operation`). A failed or cancelled
one keeps its input and the results of the documents it stored, so `POST
.../operations/{id}/retry` can run it again (server/retry.py): the documents already stored
answer their recorded results, the others are planned afresh. Rows older than SWEEP_AFTER
whose operation is not open are swept, those of a failed or cancelled operation once it has
been closed for RETRY_WINDOW.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import datetime, timedelta
from typing import Any

from engine.db import Connection
from engine.errors import InvalidInput, NotFound
from engine.retain.payloads import (
    ChunkJob,
    ChunkSlice,
    DocumentInput,
    DocumentPlan,
    RetainItem,
    Source,
    UpdateMode,
    UpsertResult,
)

# Rows per INSERT when staging: bounds one statement's size for very large requests.
STAGE_BATCH = 500
# Staged rows of operations no longer open are removed after this long (they are removed at
# once when their operation ends; this catches operations whose workflow never ended, e.g.
# terminated by an operator).
SWEEP_AFTER = timedelta(hours=1)
# How long a failed or cancelled operation's input is kept for a retry.
RETRY_WINDOW = timedelta(days=1)


def item_json(item: RetainItem) -> dict[str, Any]:
    return {
        "content": item.content,
        "timestamp": item.timestamp.isoformat() if item.timestamp else None,
        "context": item.context,
        "metadata": item.metadata,
        "tags": item.tags,
        "entities": item.entities,
    }


def item_span(item: RetainItem) -> dict[str, Any]:
    """What a document keeps of an item (documents.items): all but its text, whose size
    locates it in the document's text."""
    span = item_json(item)
    del span["content"]
    return {**span, "chars": len(item.content)}


def stored_items(content: str, spans: list[dict[str, Any]]) -> list[RetainItem] | None:
    """The items a document was retained as, cut back out of its text (items are joined
    by a blank line); None when there are no spans or the text no longer matches them."""
    items: list[RetainItem] = []
    position = 0
    for index, span in enumerate(spans):
        if index:
            if content[position : position + 2] != "\n\n":
                return None
            position += 2
        end = position + int(span["chars"])
        if end > len(content):
            return None
        items.append(item_from_json({**span, "content": content[position:end]}))
        position = end
    return items if items and position == len(content) else None


def item_from_json(data: dict[str, Any]) -> RetainItem:
    stamp = data.get("timestamp")
    return RetainItem(
        content=data["content"],
        timestamp=datetime.fromisoformat(stamp) if stamp else None,
        context=data.get("context", ""),
        metadata=dict(data.get("metadata", {})),
        entities=list(data.get("entities", [])),
        tags=list(data.get("tags", [])),
    )


_STAGE = """
INSERT INTO retain_documents (operation_id, seq, bank_id, document_id, update_mode, items,
                              records)
SELECT $1, t.seq, $2, t.document_id, t.mode, t.items::jsonb, t.records
FROM unnest($3::int[], $4::text[], $5::text[], $6::text[], $7::int[])
     AS t(seq, document_id, mode, items, records)
ON CONFLICT DO NOTHING
"""


async def stage_documents(
    conn: Connection, operation_id: str, bank_id: str, documents: list[DocumentInput]
) -> None:
    for start in range(0, len(documents), STAGE_BATCH):
        batch = documents[start : start + STAGE_BATCH]
        await conn.execute(
            _STAGE,
            operation_id,
            bank_id,
            list(range(start, start + len(batch))),
            [d.document_id for d in batch],
            [d.update_mode for d in batch],
            # As JSON text: a Python list would read as an array dimension, not a value.
            [json.dumps([item_json(i) for i in d.items], ensure_ascii=False) for d in batch],
            [len(d.items) for d in batch],
        )


_LIST = {
    "retain": "SELECT seq, document_id, records FROM retain_documents"
    " WHERE operation_id = $1 AND seq > $2 ORDER BY seq LIMIT $3",
    "import": "SELECT seq, document_id, records FROM import_documents"
    " WHERE operation_id = $1 AND seq > $2 ORDER BY seq LIMIT $3",
}

_LOAD = {
    "retain": "SELECT seq, document_id, update_mode, items FROM retain_documents"
    " WHERE operation_id = $1 AND seq = ANY($2::int[]) ORDER BY seq",
    "import": "SELECT seq, document_id, 'replace' AS update_mode, items FROM import_documents"
    " WHERE operation_id = $1 AND seq = ANY($2::int[]) ORDER BY seq",
}


async def list_documents(
    conn: Connection, source: Source, operation_id: str, after_seq: int, limit: int
) -> list[tuple[int, str, int]]:
    """(seq, document id, records) of the staged documents after `after_seq`, in order."""
    rows = await conn.fetch(_LIST[source], operation_id, after_seq, limit)
    return [(r["seq"], r["document_id"], r["records"]) for r in rows]


async def load_documents(
    conn: Connection, source: Source, operation_id: str, seqs: list[int]
) -> dict[int, DocumentInput | InvalidInput]:
    """The staged documents by seq; a corrupt one is its error, so the others go on."""
    rows = await conn.fetch(_LOAD[source], operation_id, seqs)
    found: dict[int, DocumentInput | InvalidInput] = {}
    for row in rows:
        stored_mode = row["update_mode"]
        mode: UpdateMode = stored_mode if stored_mode in ("append", "reprocess") else "replace"
        try:
            items = [item_from_json(i) for i in row["items"]]
        except (KeyError, TypeError, ValueError) as exc:
            found[row["seq"]] = InvalidInput(
                "items", f"staged document {row['document_id']} is corrupt ({exc!r})"
            )
            continue
        found[row["seq"]] = DocumentInput(row["document_id"], items, mode)
    missing = [s for s in seqs if s not in found]
    if missing:
        raise NotFound("staged document", f"{operation_id}#{missing[0]}")
    return found


def chunk_json(chunk: ChunkJob) -> dict[str, Any]:
    data = asdict(chunk)
    data["mentioned_at"] = chunk.mentioned_at.isoformat() if chunk.mentioned_at else None
    return data


def chunk_from_json(data: dict[str, Any]) -> ChunkJob:
    values = dict(data)
    stamp = values.get("mentioned_at")
    values["mentioned_at"] = datetime.fromisoformat(stamp) if stamp else None
    return ChunkJob(**values)


_SAVE_PLANS = """
INSERT INTO document_plans (operation_id, seq, bank_id, document_id, plan)
SELECT $1, t.seq, $2, t.document_id, t.plan
FROM unnest($3::int[], $4::text[], $5::jsonb[]) AS t(seq, document_id, plan)
ON CONFLICT (operation_id, seq) DO UPDATE SET plan = EXCLUDED.plan
WHERE document_plans.result IS NULL
"""
_PLANNED_CHUNKS = """
SELECT seq, jsonb_array_length(plan->'new_chunks') AS chunks,
       (SELECT coalesce(sum(length(c->>'text')), 0)
        FROM jsonb_array_elements(plan->'new_chunks') c) AS chars
FROM document_plans
WHERE operation_id = $1 AND seq = ANY($2::int[])
"""


async def save_plans(
    conn: Connection, operation_id: str, bank_id: str, plans: list[tuple[int, DocumentPlan]]
) -> dict[int, tuple[int, int]]:
    """Stage the plans; returns each one's new chunks and their characters by seq. A
    document already stored by this operation (a retried step) keeps the plan it was stored
    with."""
    data = [
        {
            "new_chunks": [chunk_json(c) for c in plan.new_chunks],
            "kept": plan.kept_chunk_ids,
            "dropped": plan.dropped_chunk_ids,
        }
        for _, plan in plans
    ]
    seqs = [seq for seq, _ in plans]
    await conn.execute(
        _SAVE_PLANS, operation_id, bank_id, seqs, [p.document_id for _, p in plans], data
    )
    rows = await conn.fetch(_PLANNED_CHUNKS, operation_id, seqs)
    return {r["seq"]: (int(r["chunks"]), int(r["chars"])) for r in rows}


_SLICE = """
SELECT p.seq, c.chunk
FROM unnest($2::int[], $3::int[], $4::int[]) AS s(seq, first, stop)
JOIN document_plans p ON p.operation_id = $1 AND p.seq = s.seq
CROSS JOIN LATERAL jsonb_array_elements(p.plan->'new_chunks') WITH ORDINALITY AS c(chunk, n)
WHERE c.n > s.first AND c.n <= s.stop
ORDER BY s.seq, c.n
"""


async def load_chunks(
    conn: Connection, operation_id: str, slices: list[ChunkSlice]
) -> list[ChunkJob]:
    """The planned new chunks named by the slices, in slice order."""
    rows = await conn.fetch(
        _SLICE,
        operation_id,
        [s.seq for s in slices],
        [s.start for s in slices],
        [s.stop for s in slices],
    )
    order = {s.seq: i for i, s in enumerate(slices)}
    rows = sorted(rows, key=lambda r: order[r["seq"]])
    return [chunk_from_json(r["chunk"]) for r in rows]


_LOAD_PLANS = """
SELECT seq, document_id, plan, result FROM document_plans
WHERE operation_id = $1 AND seq = ANY($2::int[])
"""


async def load_plans(
    conn: Connection, operation_id: str, seqs: list[int]
) -> dict[int, tuple[DocumentPlan, UpsertResult | None]]:
    """Several documents' plans and, for those already upserted, their results."""
    found: dict[int, tuple[DocumentPlan, UpsertResult | None]] = {}
    for row in await conn.fetch(_LOAD_PLANS, operation_id, seqs):
        data = row["plan"]
        plan = DocumentPlan(
            row["document_id"],
            [chunk_from_json(c) for c in data["new_chunks"]],
            list(data["kept"]),
            list(data["dropped"]),
        )
        result = UpsertResult(**row["result"]) if row["result"] is not None else None
        found[row["seq"]] = (plan, result)
    missing = [s for s in seqs if s not in found]
    if missing:
        raise NotFound("document plan", f"{operation_id}#{missing[0]}")
    return found


_SAVE_RESULTS = """
UPDATE document_plans p SET result = v.result
FROM unnest($2::int[], $3::jsonb[]) AS v(seq, result)
WHERE p.operation_id = $1 AND p.seq = v.seq
"""


async def save_results(
    conn: Connection, operation_id: str, results: list[tuple[int, UpsertResult]]
) -> None:
    await conn.execute(
        _SAVE_RESULTS,
        operation_id,
        [seq for seq, _ in results],
        [asdict(result) for _, result in results],
    )


# The operation's totals and document ids, from its documents' upsert results.
_TOTALS = """
SELECT count(*) AS documents,
       coalesce(sum((result->>'facts_added')::int), 0) AS facts_added,
       coalesce(sum((result->>'facts_removed')::int), 0) AS facts_removed,
       coalesce(sum((result->>'chunks_added')::int), 0) AS chunks_added,
       coalesce(sum((result->>'chunks_removed')::int), 0) AS chunks_removed,
       coalesce(sum((result->>'links_added')::int), 0) AS links_added,
       coalesce(array_agg(document_id ORDER BY seq), '{}') AS document_ids
FROM document_plans WHERE operation_id = $1 AND result IS NOT NULL
"""


async def operation_totals(conn: Connection, operation_id: str) -> dict[str, Any]:
    row = await conn.fetchrow(_TOTALS, operation_id)
    assert row is not None
    values = dict(row)
    values["document_ids"] = list(values["document_ids"])
    return values


_DISCARD = (
    "DELETE FROM retain_documents WHERE operation_id = $1",
    "DELETE FROM document_plans WHERE operation_id = $1",
    "DELETE FROM staged_facts WHERE operation_id = $1",
)

# What a failed or cancelled operation drops: unfinished plans and extracted facts (a retry
# plans and extracts again); its input and the stored documents' results stay.
_DISCARD_UNFINISHED = (
    "DELETE FROM document_plans WHERE operation_id = $1 AND result IS NULL",
    "DELETE FROM staged_facts WHERE operation_id = $1",
)

_OPEN = (
    "(SELECT 1 FROM operations o WHERE o.operation_id = r.operation_id"
    " AND o.status IN ('pending', 'running'))"
)
# An operation still open, or closed as failed/cancelled within the retry window ($2).
_RETRYABLE = (
    "(SELECT 1 FROM operations o WHERE o.operation_id = r.operation_id"
    " AND (o.status IN ('pending', 'running') OR (o.status IN ('failed', 'cancelled')"
    " AND o.updated_at > now() - $2::interval)))"
)
_SWEEP_INPUT = (
    f"DELETE FROM retain_documents r WHERE r.created_at < now() - $1::interval"
    f" AND NOT EXISTS {_RETRYABLE}",
    f"DELETE FROM document_plans r WHERE r.created_at < now() - $1::interval"
    f" AND NOT EXISTS {_RETRYABLE}",
)
_SWEEP_WORK = (
    f"DELETE FROM staged_facts r WHERE r.created_at < now() - $1::interval AND NOT EXISTS {_OPEN}",
    f"DELETE FROM document_waiters r WHERE r.queued_at < now() - $1::interval"
    f" AND NOT EXISTS {_OPEN}",
)


async def discard_operation(
    conn: Connection, operation_id: str, *, keep_input: bool = False
) -> None:
    """Remove what the operation staged (its claims are released by engine/retain/claims);
    with `keep_input`, only what a retry makes again."""
    for statement in _DISCARD_UNFINISHED if keep_input else _DISCARD:
        await conn.execute(statement, operation_id)


async def staged_input(conn: Connection, operation_id: str) -> tuple[int, int]:
    """(documents, items) a retain operation has staged; (0, 0) once its input is gone."""
    row = await conn.fetchrow(
        "SELECT count(*) AS documents, coalesce(sum(records), 0) AS items"
        " FROM retain_documents WHERE operation_id = $1",
        operation_id,
    )
    assert row is not None
    return int(row["documents"]), int(row["items"])


async def sweep_staging(
    conn: Connection, older_than: timedelta = SWEEP_AFTER, retry_window: timedelta = RETRY_WINDOW
) -> None:
    """Remove staged rows of operations that are no longer open (nor retryable), once old."""
    for statement in _SWEEP_INPUT:
        await conn.execute(statement, older_than, retry_window)
    for statement in _SWEEP_WORK:
        await conn.execute(statement, older_than)
