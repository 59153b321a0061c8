"""Files kept in PostgreSQL (`stored_files`, migration 0016) in 1 MiB chunks: written from
and read into a local file or a stream, never held whole in memory."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import IO

from engine.db import Connection, Pool
from engine.errors import NotFound

CHUNK_BYTES = 1024 * 1024


@dataclass(frozen=True)
class StoredFile:
    key: str
    bank_id: str
    filename: str
    content_type: str
    byte_size: int


_FILE = """
SELECT key, bank_id, filename, content_type, byte_size FROM stored_files
WHERE key = $1 AND complete
"""

_BEGIN = """
INSERT INTO stored_files (key, bank_id, filename, content_type) VALUES ($1, $2, $3, $4)
ON CONFLICT (key) DO UPDATE SET filename = $3, content_type = $4, byte_size = 0,
    complete = false, created_at = now()
"""


async def file_bank(conn: Connection, key: str) -> str | None:
    """The bank a stored file belongs to (what the security middleware scopes it by)."""
    value: str | None = await conn.fetchval("SELECT bank_id FROM stored_files WHERE key = $1", key)
    return value


async def get_stored_file(conn: Connection, key: str) -> StoredFile:
    row = await conn.fetchrow(_FILE, key)
    if row is None:
        raise NotFound("file", key)
    return StoredFile(**dict(row))


async def store_file(
    conn: Connection, key: str, bank_id: str, filename: str, content_type: str, source: IO[bytes]
) -> StoredFile:
    """Copy `source` into the store under `key`, replacing what a failed attempt left, in
    one transaction (a reader never sees half a file)."""
    async with conn.transaction():
        await conn.execute(_BEGIN, key, bank_id, filename, content_type)
        await conn.execute("DELETE FROM stored_file_chunks WHERE key = $1", key)
        size = 0
        seq = 0
        # A read may inflate a ZIP entry (an archive's original): off the event loop.
        while data := await asyncio.to_thread(source.read, CHUNK_BYTES):
            await conn.execute(
                "INSERT INTO stored_file_chunks (key, seq, data) VALUES ($1, $2, $3)",
                key,
                seq,
                data,
            )
            size += len(data)
            seq += 1
        await conn.execute(
            "UPDATE stored_files SET byte_size = $2, complete = true WHERE key = $1", key, size
        )
    return StoredFile(key, bank_id, filename, content_type, size)


async def stream_file(pool: Pool, key: str) -> AsyncIterator[bytes]:
    """The file's bytes, chunk by chunk (one chunk in memory at a time)."""
    seq = 0
    while True:
        async with pool.acquire() as conn:
            data: bytes | None = await conn.fetchval(
                "SELECT data FROM stored_file_chunks WHERE key = $1 AND seq = $2", key, seq
            )
        if data is None:
            return
        yield data
        seq += 1


async def fetch_file(pool: Pool, key: str, target: IO[bytes]) -> int:
    """Write the stored file into `target`; its size."""
    size = 0
    async for data in stream_file(pool, key):
        target.write(data)
        size += len(data)
    return size


async def delete_file(conn: Connection, key: str) -> None:
    await conn.execute("DELETE FROM stored_files WHERE key = $1", key)
