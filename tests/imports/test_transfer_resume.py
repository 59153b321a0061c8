"""An archive import writes every table's rows once, with the source's values, however often
it runs: a retried import (its worker died after the last commit) finds its positions in
transfer_progress and adds nothing — not even to the tables whose ids are sequences. A
file-retained document's original and every document's items (what a reprocess reads)
come along."""

from __future__ import annotations

import io
import json
import uuid
import zipfile

import httpx

from engine.db import Pool
from engine.store.banks import ensure_bank
from engine.store.document_files import get_original, store_original
from engine.transfer.archive import write_archive
from engine.transfer.payloads import ExportScope, ImportPlan
from engine.transfer.restore import ArchiveImport, mapped_id
from engine.transfer.storage import fetch_file

BASE = "/v1/default/banks"
TABLES = (
    "documents",
    "document_files",
    "chunks",
    "memory_units",
    "memory_terms",
    "entities",
    "unit_entities",
    "memory_links",
    "memory_versions",
    "memory_feedback",
    "tombstones",
)


async def counts(pool: Pool, bank: str) -> dict[str, int]:
    async with pool.acquire() as conn:
        return {
            t: int(await conn.fetchval(f"SELECT count(*) FROM {t} WHERE bank_id = $1", bank))
            for t in TABLES
        }


async def originals(pool: Pool, bank: str) -> dict[str, tuple[str, str, bytes]]:
    """Each document's original (as the attachments route finds it): name, type, bytes."""
    found = {}
    async with pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT document_id, sha256 FROM document_files WHERE bank_id = $1", bank
        )
        for row in rows:
            stored = await get_original(conn, bank, row["sha256"][:32])
            data = io.BytesIO()
            await fetch_file(pool, stored.key, data)
            found[row["document_id"]] = (stored.filename, stored.content_type, data.getvalue())
    return found


async def items(pool: Pool, bank: str) -> dict[str, object]:
    async with pool.acquire() as conn:
        rows = await conn.fetch("SELECT document_id, items FROM documents WHERE bank_id = $1", bank)
    return {r["document_id"]: r["items"] for r in rows}


async def test_import_is_faithful_and_idempotent(
    api: httpx.AsyncClient, pool: Pool, bank_id: str
) -> None:
    settings = {"extraction_mode": "local", "enable_observations": False}
    assert (await api.put(f"{BASE}/{bank_id}", json=settings)).status_code == 200
    notes = [
        "Ana flew to Lisbon in May 2023. Ana stayed near the river.",
        "Bo adopted a cat named Miso. Bo walks the dog every morning.",
    ]
    batch = [
        {"content": text, "document_id": f"d{i}", "timestamp": f"2024-0{i + 1}-02T10:00:00Z"}
        for i, text in enumerate(notes)
    ]
    assert (await api.post(f"{BASE}/{bank_id}/memories", json={"items": batch})).status_code == 200
    pdf = bytes(range(256)) * 5000  # 1.2 MiB: two stored chunks
    async with pool.acquire() as conn:
        await store_original(conn, bank_id, "d0", "trip.pdf", "application/pdf", io.BytesIO(pdf))
    facts = (await api.get(f"{BASE}/{bank_id}/memories/list")).json()["items"]
    # The marked fact must survive the forget below, which erases its feedback with it.
    marked = next(fact["id"] for fact in facts if "Miso" not in fact["text"])
    feedback = await api.post(
        f"{BASE}/{bank_id}/memories/{marked}/feedback", json={"signal": "wrong"}
    )
    assert feedback.status_code == 200, feedback.text
    forgotten = await api.post(f"{BASE}/{bank_id}/forget", json={"text": "Miso"})
    assert forgotten.status_code == 200
    source = await counts(pool, bank_id)
    # Links and versions depend on what the extractor and the link step made of two notes;
    # they are compared below, but the rows that must be there to test anything are these.
    must = (
        "documents",
        "document_files",
        "chunks",
        "memory_units",
        "entities",
        "memory_feedback",
        "tombstones",
    )
    assert all(source[t] > 0 for t in must), source

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        async with pool.acquire() as conn:
            await write_archive(conn, bank_id, ExportScope(), archive)
    target = f"{bank_id}-copy"
    async with pool.acquire() as conn:
        await ensure_bank(conn, target)
    plan = ImportPlan(str(uuid.uuid4()), target)
    for _ in range(2):
        buffer.seek(0)
        with zipfile.ZipFile(buffer) as archive:
            await ArchiveImport(pool, plan, archive, batch=3).run()
        assert await counts(pool, target) == source
    assert await originals(pool, target) == {"d0": ("trip.pdf", "application/pdf", pdf)}
    source_items = await items(pool, bank_id)
    assert await items(pool, target) == source_items
    assert all(source_items.values()), source_items  # each with its item's timestamp

    copied = uuid.UUID(mapped_id(plan.operation_id, marked))
    async with pool.acquire() as conn:
        query = (
            "SELECT text, embedding, importance, strength, needs_correction, mentioned_at"
            " FROM memory_units WHERE id = $1"
        )
        before = await conn.fetchrow(query, uuid.UUID(marked))
        after = await conn.fetchrow(query, copied)
    assert before is not None and after is not None
    assert before["needs_correction"]
    assert dict(after) == dict(before)  # text, embedding, lifecycle state, dates

    # An archive written before originals travelled (no such section, no entries) imports
    # all the rest.
    old = io.BytesIO()
    buffer.seek(0)
    with zipfile.ZipFile(buffer) as archive, zipfile.ZipFile(old, "w") as rewritten:
        manifest = json.loads(archive.read("manifest.json"))
        del manifest["sections"]["document_files"]
        rewritten.writestr("manifest.json", json.dumps(manifest))
        for name in archive.namelist():
            if name != "manifest.json" and name.endswith(".jsonl") and "document_files" not in name:
                rewritten.writestr(name, archive.read(name))
    older = f"{bank_id}-old"
    async with pool.acquire() as conn:
        await ensure_bank(conn, older)
    with zipfile.ZipFile(old) as archive:
        await ArchiveImport(pool, ImportPlan(str(uuid.uuid4()), older), archive).run()
    assert await counts(pool, older) == {**source, "document_files": 0}
