"""Transfer activities: write a bank's archive, import an archive, end the operation."""

from __future__ import annotations

import tempfile
import zipfile
from typing import Any

from temporalio import activity

from engine.db import Pool
from engine.errors import InvalidInput
from engine.transfer.archive import write_archive
from engine.transfer.payloads import ExportJob, ImportJob, TransferEnd
from engine.transfer.restore import ArchiveImport, clear_progress
from engine.transfer.storage import delete_file, fetch_file, store_file

# Archives above this size spill from memory to a temporary file on the worker.
SPOOL_BYTES = 16 * 1024 * 1024


class TransferActivities:
    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    @activity.defn
    async def export_archive(self, job: ExportJob) -> dict[str, Any]:
        """The archive, written from one snapshot and stored under `job.key`."""
        with tempfile.SpooledTemporaryFile(SPOOL_BYTES) as spool:
            with zipfile.ZipFile(spool, "w", zipfile.ZIP_DEFLATED) as archive:
                async with self._pool.acquire() as conn:
                    manifest = await write_archive(conn, job.bank_id, job.scope, archive)
            spool.seek(0)
            async with self._pool.acquire() as conn:
                stored = await store_file(
                    conn, job.key, job.bank_id, job.filename, "application/zip", spool
                )
        return {
            "download_url": f"/v1/default/files/download/{stored.key}",
            "storage_key": stored.key,
            "byte_size": stored.byte_size,
            "filename": stored.filename,
            "exported": manifest.sections,
        }

    @activity.defn
    async def import_archive(self, job: ImportJob) -> dict[str, Any]:
        """The archive's sections into the plan's bank; rows stored per section."""
        with tempfile.SpooledTemporaryFile(SPOOL_BYTES) as spool:
            await fetch_file(self._pool, job.archive_key, spool)
            spool.seek(0)
            try:
                archive = zipfile.ZipFile(spool)
            except zipfile.BadZipFile as exc:
                raise InvalidInput("file", "is not a ZIP archive") from exc
            with archive:
                stored = await ArchiveImport(self._pool, job.plan, archive).run()
        return {
            "imported": stored,
            "documents_imported": stored.get("documents", 0),
            "facts_imported": stored.get("facts", 0),
            "observations_imported": stored.get("observation_units", 0),
            "mental_models_imported": stored.get("mental_models", 0),
        }

    @activity.defn
    async def end_transfer(self, end: TransferEnd) -> None:
        """Progress rows and a consumed archive (an upload, a clone's) go."""
        async with self._pool.acquire() as conn, conn.transaction():
            await clear_progress(conn, end.operation_id)
            if end.discard_key is not None:
                await delete_file(conn, end.discard_key)
