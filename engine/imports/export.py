"""A bank as JSON Lines that import reads back: one item record per chunk.

Documents keep the items they were retained from only as joined text, but each chunk's facts
carry its item's timestamp, context, metadata and tags; a chunk re-chunks to itself (it is
within the chunk size and its cuts are content-defined), so importing the export into a new
bank extracts the same chunks with the same dates and yields the same facts. A chunk without
facts takes its document's values. Timestamps come back in UTC.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from engine.db import Connection

# Documents per round trip while exporting.
EXPORT_PAGE = 100

_DOCUMENTS = """
SELECT document_id, mentioned_at, context, metadata, tags FROM documents
WHERE bank_id = $1 AND document_id > $2 ORDER BY document_id LIMIT $3
"""

_CHUNKS = """
SELECT document_id, chunk_id, content, char_start, chunk_index FROM chunks
WHERE bank_id = $1 AND document_id = ANY($2::text[])
"""

_CHUNK_ITEMS = """
SELECT DISTINCT ON (chunk_id) chunk_id, mentioned_at, context, metadata, tags
FROM memory_units
WHERE bank_id = $1 AND document_id = ANY($2::text[]) AND fact_type <> 'observation'
ORDER BY chunk_id, created_at
"""


async def export_records(conn: Connection, bank_id: str) -> AsyncIterator[dict[str, Any]]:
    """Item records of every document, in document id order, each document's chunks in
    time order."""
    after = ""
    while True:
        documents = await conn.fetch(_DOCUMENTS, bank_id, after, EXPORT_PAGE)
        if not documents:
            return
        ids = [d["document_id"] for d in documents]
        chunks = await conn.fetch(_CHUNKS, bank_id, ids)
        facts = {r["chunk_id"]: r for r in await conn.fetch(_CHUNK_ITEMS, bank_id, ids)}
        by_document: dict[str, list[Any]] = {}
        for chunk in chunks:
            by_document.setdefault(chunk["document_id"], []).append(chunk)
        for document in documents:
            records = []
            for chunk in by_document.get(document["document_id"], []):
                source = facts.get(chunk["chunk_id"], document)
                stamp = source["mentioned_at"]
                records.append(
                    {
                        "document_id": document["document_id"],
                        "content": chunk["content"],
                        "timestamp": stamp.isoformat() if stamp else None,
                        "context": source["context"],
                        "metadata": source["metadata"],
                        "tags": list(source["tags"]),
                        "_order": (
                            stamp.timestamp() if stamp else float("-inf"),
                            chunk["char_start"] if chunk["char_start"] is not None else -1,
                            chunk["chunk_index"],
                        ),
                    }
                )
            records.sort(key=lambda r: r["_order"])
            for record in records:
                del record["_order"]
                yield record
        after = ids[-1]
