"""The original bytes of file-retained documents (migration 0019): kept in `stored_files`
under a key made of the bank and the bytes' sha256, linked to their document, and served
as Hindsight's attachments (`GET .../attachments/{id}`, the id a prefix of the sha256).

The database deletes an original with its document (a trigger, whatever path deletes the
document); a forget that takes text out of a document drops its original too
(`drop_originals`), since the original still holds the text.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import IO

from engine.db import Connection
from engine.errors import NotFound
from engine.transfer.storage import CHUNK_BYTES, StoredFile, store_file

ATTACHMENT_ID_CHARS = 32


@dataclass(frozen=True)
class Original:
    """A document's original file, as the document reads list it."""

    document_id: str
    sha256: str
    key: str
    filename: str
    content_type: str
    byte_size: int

    @property
    def attachment_id(self) -> str:
        return self.sha256[:ATTACHMENT_ID_CHARS]


def original_key(bank_id: str, sha256: str) -> str:
    """The stored-file key: URL-safe whatever the bank id holds, one per bank and content."""
    bank = hashlib.sha256(bank_id.encode()).hexdigest()[:16]
    return f"original-{bank}-{sha256}"


def content_sha256(source: IO[bytes]) -> str:
    """The sha256 of a seekable file, read in chunks; the file is left at its start."""
    digest = hashlib.sha256()
    source.seek(0)
    while data := source.read(CHUNK_BYTES):
        digest.update(data)
    source.seek(0)
    return digest.hexdigest()


_LINK = """
INSERT INTO document_files (bank_id, document_id, key, sha256) VALUES ($1, $2, $3, $4)
ON CONFLICT (bank_id, document_id) DO UPDATE SET key = EXCLUDED.key, sha256 = EXCLUDED.sha256
"""


async def store_original(
    conn: Connection,
    bank_id: str,
    document_id: str,
    filename: str,
    content_type: str,
    source: IO[bytes],
) -> Original:
    """Keep `source` as the original of `document_id` (replacing an earlier one); bytes
    already stored for the bank are not stored again."""
    sha = content_sha256(source)
    key = original_key(bank_id, sha)
    async with conn.transaction():
        row = await conn.fetchrow(
            "SELECT byte_size FROM stored_files WHERE key = $1 AND complete FOR UPDATE", key
        )
        if row is None:
            stored = await store_file(conn, key, bank_id, filename, content_type, source)
            size = stored.byte_size
        else:
            size = int(row["byte_size"])
        await conn.execute(_LINK, bank_id, document_id, key, sha)
    return Original(document_id, sha, key, filename, content_type, size)


async def drop_originals(conn: Connection, bank_id: str, document_ids: list[str]) -> None:
    """The documents lose their originals (the bytes go when no other document uses them)."""
    if document_ids:
        await conn.execute(
            "DELETE FROM document_files WHERE bank_id = $1 AND document_id = ANY($2::text[])",
            bank_id,
            document_ids,
        )


_ORIGINALS = """
SELECT f.document_id, f.sha256, f.key, s.filename, s.content_type, s.byte_size
FROM document_files f JOIN stored_files s ON s.key = f.key AND s.complete
WHERE f.bank_id = $1 AND f.document_id = $2
"""


async def document_originals(conn: Connection, bank_id: str, document_id: str) -> list[Original]:
    return [Original(**dict(r)) for r in await conn.fetch(_ORIGINALS, bank_id, document_id)]


_BY_ID = """
SELECT s.key, s.bank_id, s.filename, s.content_type, s.byte_size
FROM document_files f JOIN stored_files s ON s.key = f.key AND s.complete
WHERE f.bank_id = $1 AND left(f.sha256, $3) = $2
LIMIT 1
"""


async def get_original(conn: Connection, bank_id: str, attachment_id: str) -> StoredFile:
    """The stored original an attachment id (a sha256 prefix) names in this bank."""
    if len(attachment_id) < 16:
        raise NotFound("attachment", attachment_id)
    row = await conn.fetchrow(_BY_ID, bank_id, attachment_id.lower(), len(attachment_id))
    if row is None:
        raise NotFound("attachment", attachment_id)
    return StoredFile(**dict(row))
