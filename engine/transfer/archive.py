"""Writing a transfer archive: a ZIP of `manifest.json`, one `<section>.jsonl` per section
and, for file-retained documents, each original's bytes as `originals/<sha256>`.

The export reads one REPEATABLE READ snapshot (a consistent bank however long it takes)
through server-side cursors, so rows stream from PostgreSQL into the compressed file a page
at a time and the bank is never held in memory.
"""

from __future__ import annotations

import asyncio
import json
import zipfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from engine.db import Connection
from engine.errors import InvalidInput
from engine.store.banks import get_bank
from engine.transfer.payloads import ExportScope
from engine.transfer.sections import ORIGINALS_PREFIX, ORIGINALS_SECTION, SECTIONS

FORMAT = "engram-transfer"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
# Rows fetched per cursor round trip.
CURSOR_PREFETCH = 200


@dataclass(frozen=True)
class Manifest:
    source_bank_id: str
    embedding_dim: int
    embedding_space: str
    exported_at: str
    sections: dict[str, int]
    document_ids: list[str] | None = None
    format: str = FORMAT
    version: int = FORMAT_VERSION
    extra: dict[str, Any] = field(default_factory=dict)

    @staticmethod
    def parse(raw: bytes) -> Manifest:
        try:
            data = json.loads(raw)
            if data.get("format") != FORMAT:
                raise InvalidInput("file", "is not an Engram transfer archive")
            if int(data.get("version", 0)) > FORMAT_VERSION:
                raise InvalidInput(
                    "file", f"archive format {data['version']} is newer than this Engram reads"
                )
            return Manifest(
                source_bank_id=str(data["source_bank_id"]),
                embedding_dim=int(data["embedding_dim"]),
                embedding_space=str(data["embedding_space"]),
                exported_at=str(data["exported_at"]),
                sections={str(k): int(v) for k, v in data["sections"].items()},
                document_ids=data.get("document_ids"),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise InvalidInput("file", f"has an unreadable manifest ({exc})") from exc


async def embedding_identity(conn: Connection) -> tuple[int, str]:
    """This database's embedding dimension and space (engine/db.py records them)."""
    rows = await conn.fetch(
        "SELECT key, value FROM engram_meta WHERE key IN ('embedding_dim', 'embedding_space')"
    )
    values = {r["key"]: r["value"] for r in rows}
    return int(values.get("embedding_dim", 0)), str(values.get("embedding_space", ""))


def _original_keys(page: list[Any]) -> dict[str, str]:
    rows = [json.loads(record[0]) for record in page]
    return {str(r["sha256"]): str(r["key"]) for r in rows}


async def _write_originals(
    conn: Connection, originals: dict[str, str], archive: zipfile.ZipFile
) -> None:
    """Each original's bytes as `originals/<sha256>`, a stored chunk at a time."""
    for sha, key in sorted(originals.items()):
        with archive.open(f"{ORIGINALS_PREFIX}{sha}", "w", force_zip64=True) as out:
            seq = 0
            while (
                data := await conn.fetchval(
                    "SELECT data FROM stored_file_chunks WHERE key = $1 AND seq = $2", key, seq
                )
            ) is not None:
                await asyncio.to_thread(out.write, data)
                seq += 1


async def write_archive(
    conn: Connection, bank_id: str, scope: ExportScope, archive: zipfile.ZipFile
) -> Manifest:
    """Every section the scope asks for, from one snapshot, then the manifest."""
    groups = scope.groups()
    counts: dict[str, int] = {}
    async with conn.transaction(isolation="repeatable_read", readonly=True):
        await get_bank(conn, bank_id)
        dim, space = await embedding_identity(conn)
        args = (
            bank_id,
            scope.document_ids,
            scope.include_observations,
            scope.include_mental_models,
        )
        for section in SECTIONS:
            if section.group not in groups:
                continue
            rows = 0
            originals: dict[str, str] = {}  # sha256 -> stored-file key
            with archive.open(f"{section.name}.jsonl", "w", force_zip64=True) as out:
                cursor = await conn.cursor(section.export_sql(), *args)
                while page := await cursor.fetch(CURSOR_PREFETCH):
                    data = "".join(f"{record[0]}\n" for record in page).encode()
                    # Deflating a page of embeddings is CPU work: off the event loop.
                    await asyncio.to_thread(out.write, data)
                    rows += len(page)
                    if section.name == ORIGINALS_SECTION:
                        originals.update(_original_keys(page))
            counts[section.name] = rows
            await _write_originals(conn, originals, archive)
    manifest = Manifest(
        source_bank_id=bank_id,
        embedding_dim=dim,
        embedding_space=space,
        exported_at=datetime.now(UTC).isoformat(),
        sections=counts,
        document_ids=scope.document_ids,
    )
    archive.writestr(MANIFEST, json.dumps(manifest.__dict__, indent=1))
    return manifest
