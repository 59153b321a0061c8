"""The staging tables of an import: parsed documents wait here for their workflows."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

from engine.db import Connection
from engine.errors import NotFound
from engine.imports.model import MAX_REPORTED_ERRORS, ParsedImport, RecordError
from engine.retain.documents import item_json

# Rows per INSERT when staging: bounds one statement's size for very large imports.
STAGE_BATCH = 500


@dataclass(frozen=True)
class ImportSummary:
    operation_id: str
    bank_id: str
    formats: list[str]
    documents: int
    items: int
    error_count: int
    errors: list[RecordError]
    created_at: datetime


_IMPORT = """
INSERT INTO imports (operation_id, bank_id, formats, documents, items, error_count, errors)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (operation_id) DO NOTHING
RETURNING 1
"""

_DOCUMENTS = """
INSERT INTO import_documents (operation_id, seq, document_id, items, records)
SELECT $1, t.seq, t.document_id, t.items::jsonb, t.records
FROM unnest($2::int[], $3::text[], $4::text[], $5::int[]) AS t(seq, document_id, items, records)
ON CONFLICT DO NOTHING
"""


async def stage_import(
    conn: Connection, operation_id: str, bank_id: str, parsed: ParsedImport
) -> bool:
    """Stage the parsed documents; False when this operation was staged before."""
    errors = [{"position": e.position, "message": e.message} for e in parsed.errors]
    created = await conn.fetchval(
        _IMPORT,
        operation_id,
        bank_id,
        parsed.formats,
        len(parsed.documents),
        parsed.records,
        len(errors),
        errors[:MAX_REPORTED_ERRORS],
    )
    if created is None:
        return False
    for start in range(0, len(parsed.documents), STAGE_BATCH):
        batch = parsed.documents[start : start + STAGE_BATCH]
        await conn.execute(
            _DOCUMENTS,
            operation_id,
            list(range(start, start + len(batch))),
            [d.document_id for d in batch],
            # As JSON text: a Python list would read as an array dimension, not a value.
            [json.dumps([item_json(i) for i in d.items], ensure_ascii=False) for d in batch],
            [d.records for d in batch],
        )
    return True


async def clear_staged(conn: Connection, operation_id: str) -> None:
    await conn.execute("DELETE FROM import_documents WHERE operation_id = $1", operation_id)


async def get_import(conn: Connection, operation_id: str) -> ImportSummary:
    row = await conn.fetchrow(
        "SELECT operation_id, bank_id, formats, documents, items, error_count, errors,"
        " created_at FROM imports WHERE operation_id = $1",
        operation_id,
    )
    if row is None:
        raise NotFound("import", operation_id)
    values = dict(row)
    values["errors"] = [RecordError(e["position"], e["message"]) for e in values["errors"]]
    return ImportSummary(**values)
