"""Reading a transfer archive into a bank, section by section, a batch of rows at a time.

Each batch and the section's new position (`transfer_progress`) commit together, so a
retried import resumes where it stopped and never writes a row twice. Ids are the archive's
mapped through uuid5(operation, id): a clone next to its source never collides with it, and
every reference inside the archive (links, evidence, versions, supersession) stays intact.
What the target bank forgot stays forgotten: its tombstones (and the archive's, imported
first) refuse chunks and facts whose hashes they hold. Embeddings travel as stored, so the
target must use the same embedding model (checked against the manifest).
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import uuid
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from engine.db import Connection, Pool
from engine.errors import InvalidInput
from engine.lifecycle.tombstones import blank_passages, text_hash
from engine.store.backlog import take_off_backlog
from engine.store.document_files import original_key
from engine.transfer.archive import MANIFEST, Manifest, embedding_identity
from engine.transfer.payloads import ImportPlan
from engine.transfer.sections import (
    MERGED,
    ORIGINALS_PREFIX,
    ORIGINALS_SECTION,
    SECTIONS,
    Section,
)
from engine.transfer.storage import store_file

# Rows per transaction: a fact row with its embedding and token vectors is ~10-40 kB.
IMPORT_BATCH = 200
_ID_SPACE = uuid.UUID("5b0c1c4e-64b9-4d8e-9d51-3f3c8d0e7a21")


def wanted(plan: ImportPlan, section: Section, manifest: Manifest) -> bool:
    if section.name not in manifest.sections:
        return False
    if plan.mode == "merge":
        return section.name in MERGED
    return {
        "data": plan.include_data,
        "config": plan.include_bank_config,
        "history": plan.include_history,
    }[section.group]


@dataclass
class _Columns:
    names: list[str]
    uuids: set[str] = field(default_factory=set)
    uuid_arrays: set[str] = field(default_factory=set)
    serial: set[str] = field(default_factory=set)


_COLUMNS = """
SELECT column_name, udt_name, coalesce(column_default, '') AS dflt
FROM information_schema.columns
WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position
"""

_PROGRESS = """
INSERT INTO transfer_progress (operation_id, section) VALUES ($1, $2)
ON CONFLICT (operation_id, section) DO UPDATE SET section = EXCLUDED.section
RETURNING rows_done, rows_stored
"""

_ADVANCE = """
UPDATE transfer_progress SET rows_done = rows_done + $3, rows_stored = rows_stored + $4
WHERE operation_id = $1 AND section = $2
"""

_TOMBSTONED = """
SELECT content_hash FROM tombstones
WHERE bank_id = $1 AND kind = $2 AND content_hash = ANY($3::text[])
"""

_DOCUMENT_MAP = """
SELECT source_id, target_id FROM transfer_documents
WHERE operation_id = $1 AND source_id = ANY($2::text[])
"""

_BANK = """
UPDATE banks SET name = $2, mission = $3, config = $4, updated_at = now() WHERE bank_id = $1
"""


def read_manifest(archive: zipfile.ZipFile) -> Manifest:
    try:
        raw = archive.read(MANIFEST)
    except KeyError as exc:
        raise InvalidInput("file", "is not an Engram transfer archive (no manifest)") from exc
    return Manifest.parse(raw)


async def check_compatible(conn: Connection, manifest: Manifest) -> None:
    dim, space = await embedding_identity(conn)
    if (manifest.embedding_dim, manifest.embedding_space) != (dim, space):
        raise InvalidInput(
            "file",
            f"the archive's embeddings are {manifest.embedding_dim}-d "
            f"({manifest.embedding_space}) and this Engram's are {dim}-d ({space});"
            " an archive moves between Engrams that use the same embedding model",
        )


def mapped_id(salt: str, value: str) -> str:
    return str(uuid.uuid5(_ID_SPACE, f"{salt}:{value}"))


def _map_json(value: Any, salt: str) -> Any:
    if isinstance(value, str):
        try:
            return mapped_id(salt, str(uuid.UUID(value)))
        except ValueError:
            return value
    if isinstance(value, list):
        return [_map_json(v, salt) for v in value]
    if isinstance(value, dict):
        return {k: _map_json(v, salt) for k, v in value.items()}
    return value


def _lines(archive: zipfile.ZipFile, section: Section, skip: int, size: int) -> Iterator[list[str]]:
    with archive.open(f"{section.name}.jsonl") as raw:
        text = io.TextIOWrapper(raw, encoding="utf-8")
        batch: list[str] = []
        for index, line in enumerate(text):
            if index < skip:
                continue
            batch.append(line)
            if len(batch) == size:
                yield batch
                batch = []
        if batch:
            yield batch


def _next_rows(batches: Iterator[list[str]]) -> tuple[int, list[dict[str, Any]]] | None:
    """The next batch: its line count and rows (None at the end of the section)."""
    lines = next(batches, None)
    if lines is None:
        return None
    return len(lines), [json.loads(line) for line in lines]


class ArchiveImport:
    """One import of one archive into one bank (a plan, an open archive, a pool)."""

    def __init__(
        self, pool: Pool, plan: ImportPlan, archive: zipfile.ZipFile, batch: int = IMPORT_BATCH
    ) -> None:
        self._pool = pool
        self._batch = batch
        self._plan = plan
        self._archive = archive
        self._salt = plan.operation_id
        self._suffix = hashlib.sha256(plan.operation_id.encode()).hexdigest()[:8]
        self.manifest = read_manifest(archive)

    async def run(self) -> dict[str, int]:
        """Every wanted section; the rows stored per section."""
        async with self._pool.acquire() as conn:
            await check_compatible(conn, self.manifest)
        stored: dict[str, int] = {}
        for section in SECTIONS:
            if wanted(self._plan, section, self.manifest):
                stored[section.name] = await self._section(section)
        return stored

    async def _section(self, section: Section) -> int:
        async with self._pool.acquire() as conn:
            progress = await conn.fetchrow(_PROGRESS, self._plan.operation_id, section.name)
            assert progress is not None  # the upsert returns its row
            columns = await self._columns(conn, section.table)
        stored = int(progress["rows_stored"])
        batches = _lines(self._archive, section, int(progress["rows_done"]), self._batch)
        # Inflating and decoding a batch (megabytes with embeddings and token vectors) runs
        # in a thread: on the event loop it starved the heartbeat on a loaded machine.
        while (parsed := await asyncio.to_thread(_next_rows, batches)) is not None:
            count, rows = parsed
            async with self._pool.acquire() as conn, conn.transaction():
                written = await self._write(conn, section, columns, rows)
                await conn.execute(_ADVANCE, self._plan.operation_id, section.name, count, written)
            stored += written
        if section.deferred:
            await self._deferred(section)
        return stored

    async def _columns(self, conn: Connection, table: str) -> _Columns:
        found = _Columns([])
        for row in await conn.fetch(_COLUMNS, table):
            name = row["column_name"]
            found.names.append(name)
            if row["udt_name"] == "uuid":
                found.uuids.add(name)
            elif row["udt_name"] == "_uuid":
                found.uuid_arrays.add(name)
            if row["dflt"].startswith("nextval("):
                found.serial.add(name)
        return found

    async def _write(
        self, conn: Connection, section: Section, columns: _Columns, rows: list[dict[str, Any]]
    ) -> int:
        if section.name == "bank":
            return await self._bank(conn, rows)
        rows = [self._mapped(section, columns, row) for row in rows]
        if section.name == "documents":
            await self._decide_documents(conn, rows)
        if rows and "document_id" in rows[0]:
            rows = await self._follow_documents(conn, rows)
        if section.name == "chunks":
            rows = await self._alive(conn, rows, "chunk", lambda r: str(r["content_hash"]))
        elif section.table == "memory_units":
            kept = await self._alive(conn, rows, "fact", lambda r: text_hash(str(r["text"])))
            await self._blank_forgotten(conn, [r for r in rows if r not in kept])
            rows = kept
        elif section.name == "unit_entities":
            rows = await self._entity_ids(conn, rows)
        elif section.name == ORIGINALS_SECTION:
            rows = await self._originals(conn, rows)
        if not rows:
            return 0
        names = [c for c in columns.names if c in rows[0] and c not in columns.serial]
        quoted = ", ".join(f'"{c}"' for c in names)
        where = " AND ".join(section.filters) or "true"
        payload = await asyncio.to_thread(json.dumps, rows, separators=(",", ":"), default=str)
        status = await conn.execute(
            f"INSERT INTO {section.table} ({quoted}) SELECT {quoted}"
            f" FROM jsonb_populate_recordset(NULL::{section.table}, $1::text::jsonb) r"
            f" WHERE {where} ON CONFLICT DO NOTHING",
            payload,
        )
        if section.name == "facts":
            # stored facts join the backlog (a trigger); those consolidated in the archive
            # leave it, their observations come along
            done = [str(r["id"]) for r in rows if r.get("consolidated_at") is not None]
            if done:
                await take_off_backlog(conn, done)
        return int(status.rsplit(" ", 1)[-1])

    def _mapped(self, section: Section, columns: _Columns, row: dict[str, Any]) -> dict[str, Any]:
        row["bank_id"] = self._plan.bank_id
        if section.table == "memory_units":
            # An export made before migration 0024 carries postings of an unknown tokeniser:
            # marked stale, so `engram retokenize` rewrites them.
            row.setdefault("terms_version", 0)
        for name in columns.uuids:
            if row.get(name) is not None:
                row[name] = mapped_id(self._salt, str(row[name]))
        for name in columns.uuid_arrays:
            if row.get(name):
                row[name] = [mapped_id(self._salt, str(v)) for v in row[name]]
        for name in columns.serial:
            row.pop(name, None)
        for name in (*section.nulled, *section.deferred):
            row[name] = None
        for name in section.id_json:
            if row.get(name) is not None:
                row[name] = _map_json(row[name], self._salt)
        if section.name == "facts" and (
            self._plan.mode == "merge" or "observation_units" not in self.manifest.sections
        ):
            # Observations built from these facts did not come along: consolidate them here.
            row["consolidated_at"] = None
        return row

    async def _bank(self, conn: Connection, rows: list[dict[str, Any]]) -> int:
        for row in rows:
            name = row.get("name") or self._plan.bank_id
            if name == self.manifest.source_bank_id:
                name = self._plan.bank_id
            await conn.execute(
                _BANK, self._plan.bank_id, name, row.get("mission") or "", row.get("config") or {}
            )
        return len(rows)

    async def _decide_documents(self, conn: Connection, rows: list[dict[str, Any]]) -> None:
        """Each archived document's id in this bank, by the conflict rule (recorded, so the
        sections after it and a retried batch follow the same decision)."""
        ids = [str(r["document_id"]) for r in rows]
        existing = {
            r["document_id"]
            for r in await conn.fetch(
                "SELECT document_id FROM documents WHERE bank_id = $1"
                " AND document_id = ANY($2::text[])",
                self._plan.bank_id,
                ids,
            )
        }
        rule = self._plan.document_conflict
        targets: dict[str, str | None] = {}
        for source in ids:
            if source not in existing or rule == "replace":
                targets[source] = source
            elif rule == "skip":
                targets[source] = None
            else:
                targets[source] = f"{source}~{self._suffix}"
        if rule == "replace" and existing:
            await conn.execute(
                "DELETE FROM documents WHERE bank_id = $1 AND document_id = ANY($2::text[])",
                self._plan.bank_id,
                sorted(existing),
            )
        await conn.executemany(
            "INSERT INTO transfer_documents (operation_id, source_id, target_id)"
            " VALUES ($1, $2, $3) ON CONFLICT (operation_id, source_id)"
            " DO UPDATE SET target_id = EXCLUDED.target_id",
            [(self._plan.operation_id, s, t) for s, t in targets.items()],
        )

    async def _follow_documents(
        self, conn: Connection, rows: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        sources = sorted({str(r["document_id"]) for r in rows if r["document_id"] is not None})
        if not sources:
            return rows
        found = await conn.fetch(_DOCUMENT_MAP, self._plan.operation_id, sources)
        targets = {r["source_id"]: r["target_id"] for r in found}
        kept = []
        for row in rows:
            source = row["document_id"]
            if source is None:
                kept.append(row)
                continue
            target = targets.get(source)
            if target is None:
                continue
            if target != source:
                row["document_id"] = target
                if row.get("chunk_id") is not None:
                    row["chunk_id"] = f"{row['chunk_id']}~{self._suffix}"
            kept.append(row)
        return kept

    async def _alive(
        self, conn: Connection, rows: list[dict[str, Any]], kind: str, key: Any
    ) -> list[dict[str, Any]]:
        hashes = [key(r) for r in rows]
        dead = {
            r["content_hash"]
            for r in await conn.fetch(_TOMBSTONED, self._plan.bank_id, kind, sorted(set(hashes)))
        }
        return [r for r, h in zip(rows, hashes, strict=True) if h not in dead]

    async def _blank_forgotten(self, conn: Connection, facts: list[dict[str, Any]]) -> None:
        """A refused fact's text goes from its chunk and document too (as at retain)."""
        for fact in facts:
            chunk = await conn.fetchrow(
                "SELECT content FROM chunks WHERE bank_id = $1 AND chunk_id = $2",
                self._plan.bank_id,
                fact.get("chunk_id"),
            )
            if chunk is None:
                continue
            start, end = fact.get("source_start"), fact.get("source_end")
            content = str(chunk["content"])
            passage = content[start:end] if start is not None and end is not None else fact["text"]
            await conn.execute(
                "UPDATE chunks SET content = $3 WHERE bank_id = $1 AND chunk_id = $2",
                self._plan.bank_id,
                fact["chunk_id"],
                blank_passages(content, [passage]),
            )
            document = await conn.fetchval(
                "SELECT content FROM documents WHERE bank_id = $1 AND document_id = $2",
                self._plan.bank_id,
                fact.get("document_id"),
            )
            if document is not None:
                await conn.execute(
                    "UPDATE documents SET content = $3 WHERE bank_id = $1 AND document_id = $2",
                    self._plan.bank_id,
                    fact["document_id"],
                    blank_passages(str(document), [passage]),
                )

    async def _originals(
        self, conn: Connection, rows: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """Each original's bytes stored under this bank's key (once per content, as at
        retain); a row whose bytes the archive lacks is not linked."""
        bank_id = self._plan.bank_id
        entries = set(self._archive.namelist())
        kept = []
        for row in rows:
            sha = str(row["sha256"])
            if f"{ORIGINALS_PREFIX}{sha}" not in entries:
                continue
            row["key"] = original_key(bank_id, sha)
            stored = await conn.fetchval(
                "SELECT 1 FROM stored_files WHERE key = $1 AND complete", row["key"]
            )
            if stored is None:
                filename = str(row.get("filename") or sha)
                content_type = str(row.get("content_type") or "application/octet-stream")
                with self._archive.open(f"{ORIGINALS_PREFIX}{sha}") as source:
                    await store_file(conn, row["key"], bank_id, filename, content_type, source)
            kept.append(row)
        return kept

    async def _entity_ids(
        self, conn: Connection, rows: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """Entities are matched by name in the target (a merge meets the bank's own)."""
        names = sorted({str(r.get("entity_name")) for r in rows})
        found = await conn.fetch(
            "SELECT normalized_name, id FROM entities WHERE bank_id = $1"
            " AND normalized_name = ANY($2::text[])",
            self._plan.bank_id,
            names,
        )
        ids = {r["normalized_name"]: str(r["id"]) for r in found}
        for row in rows:
            row["entity_id"] = ids.get(str(row.get("entity_name")))
        return rows

    async def _deferred(self, section: Section) -> None:
        """Columns naming rows of the same section (a fact's successor), once all are in."""
        batches = _lines(self._archive, section, 0, self._batch)
        while (parsed := await asyncio.to_thread(_next_rows, batches)) is not None:
            pairs = [
                (name, mapped_id(self._salt, row["id"]), mapped_id(self._salt, row[name]))
                for row in parsed[1]
                for name in section.deferred
                if row.get(name) is not None
            ]
            if not pairs:
                continue
            async with self._pool.acquire() as conn:
                for name, row_id, target in pairs:
                    await conn.execute(
                        f'UPDATE {section.table} SET "{name}" = $2 WHERE id = $1'
                        f" AND EXISTS (SELECT 1 FROM {section.table} x WHERE x.id = $2)",
                        uuid.UUID(row_id),
                        uuid.UUID(target),
                    )


async def clear_progress(conn: Connection, operation_id: str) -> None:
    await conn.execute("DELETE FROM transfer_progress WHERE operation_id = $1", operation_id)
    await conn.execute("DELETE FROM transfer_documents WHERE operation_id = $1", operation_id)
