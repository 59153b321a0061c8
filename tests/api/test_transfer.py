"""Transfer archives: a bank exported, downloaded and restored elsewhere answers as the source
did (its file originals served as attachments too); a clone copies a bank; a document merge
brings nothing forgotten back. Driven through hindsight-client 1.1's generated API
(BankTransferApi, DocumentTransferApi)."""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from hindsight_client_api.api.bank_transfer_api import BankTransferApi
from hindsight_client_api.api.document_transfer_api import DocumentTransferApi
from hindsight_client_api.api_client import ApiClient
from hindsight_client_api.configuration import Configuration
from starlette.applications import Starlette
from support.operations import completed_operation
from support.serve import serve
from temporalio.worker import Worker

from engine.db import Pool
from engine.lifecycle.access import reinforce
from engine.store.document_files import store_original

BASE = "/v1/default/banks"
_WAITING = "SELECT count(*) FROM consolidation_backlog WHERE bank_id = $1"
_FACTS = "SELECT id::text AS id FROM memory_units WHERE bank_id = $1"
NOTES = [
    ("trip", "Ana flew to Lisbon in May 2023. Ana stayed at a hotel near the river."),
    ("pets", "Bo adopted a cat named Miso. Bo walks the dog every morning."),
    ("work", "Cy started a new job at the bakery. Cy bakes sourdough on Fridays."),
]


async def snapshot(api: httpx.AsyncClient, bank: str) -> dict[str, Any]:
    """What a user sees of a bank: documents, facts by type, entities, a recall's answer."""
    documents = (await api.get(f"{BASE}/{bank}/documents")).json()["items"]
    facts = (await api.get(f"{BASE}/{bank}/memories/list", params={"limit": 100})).json()
    recall = await api.post(
        f"{BASE}/{bank}/memories/recall", json={"query": "Where did Ana fly?", "budget": "low"}
    )
    stats = (await api.get(f"{BASE}/{bank}/stats")).json()
    return {
        "documents": sorted(d["id"] for d in documents),
        "facts": sorted(
            (f["text"], f["fact_type"], f.get("occurred_start")) for f in facts["items"]
        ),
        "top": [r["text"] for r in recall.json()["results"][:2]],
        "links": stats.get("total_links"),
        "nodes": stats.get("total_nodes"),
    }


async def test_export_download_restore_and_clone(
    app: Starlette, worker: Worker, api: httpx.AsyncClient, pool: Pool, bank_id: str
) -> None:
    settings = {"extraction_mode": "local", "enable_observations": False}
    assert (await api.put(f"{BASE}/{bank_id}", json=settings)).status_code == 200
    items = [
        {"content": text, "document_id": doc, "timestamp": f"2024-03-0{i + 1}T10:00:00Z"}
        for i, (doc, text) in enumerate(NOTES)
    ]
    retained = await api.post(f"{BASE}/{bank_id}/memories", json={"items": items})
    assert retained.status_code == 200, retained.text
    forgotten = await api.post(f"{BASE}/{bank_id}/forget", json={"text": "Miso"})
    assert forgotten.status_code == 200, forgotten.text
    original = b"%PDF-1.4 Ana's boarding pass\n" * 100
    async with pool.acquire() as conn:
        await store_original(
            conn, bank_id, "trip", "pass.pdf", "application/pdf", io.BytesIO(original)
        )
        # one fact consolidated: it stays off the backlog where the archive is restored
        await conn.execute(
            "DELETE FROM consolidation_backlog WHERE fact_id ="
            " (SELECT min(fact_id::text)::uuid FROM consolidation_backlog WHERE bank_id = $1)",
            bank_id,
        )
        # recall's accesses, still beside the facts (migration 0041), travel in their rows
        facts = [r["id"] for r in await conn.fetch(_FACTS, bank_id)]
        assert await reinforce(conn, bank_id, dict.fromkeys(facts, 2), datetime.now(UTC)) > 0
    attachment = hashlib.sha256(original).hexdigest()[:32]
    before = await snapshot(api, bank_id)
    assert before["facts"] and not any("Miso" in f[0] for f in before["facts"])

    restored, cloned = f"{bank_id}-restored", f"{bank_id}-clone"
    async with serve(app) as url, ApiClient(Configuration(host=url)) as client:
        banks, documents = BankTransferApi(client), DocumentTransferApi(client)
        submitted = await banks.export_bank_transfer(bank_id)
        exported = await completed_operation(api, bank_id, submitted.operation_id)
        meta = exported["result_metadata"]
        assert meta["download_url"] == f"/v1/default/files/download/{meta['storage_key']}"
        archive = bytes(await documents.download_file(meta["storage_key"]))
        assert len(archive) == meta["byte_size"]
        # Restore on "another machine": the target bank does not exist yet.
        imported = await banks.import_bank_transfer(restored, ("bank.zip", archive))
        result = (await completed_operation(api, restored, imported.operation_id))[
            "result_metadata"
        ]
        clone = await banks.clone_bank(bank_id, target_bank_id=cloned)
        await completed_operation(api, bank_id, clone.operation_id)

    with zipfile.ZipFile(io.BytesIO(archive)) as opened:
        manifest = json.loads(opened.read("manifest.json"))
        sections = {name: opened.read(name).decode() for name in opened.namelist()}
    assert manifest["source_bank_id"] == bank_id and manifest["sections"]["facts"] > 0
    assert sections["tombstones.jsonl"] and not any("Miso" in s for s in sections.values())
    assert result["facts_imported"] == len(before["facts"])
    assert f"originals/{hashlib.sha256(original).hexdigest()}" in sections
    for target in (restored, cloned):
        assert await snapshot(api, target) == before
        waiting = await pool.fetchval(_WAITING, target)
        assert waiting == len(before["facts"]) - 1
        carried = await pool.fetchval(
            "SELECT min(access_count) FROM memory_units WHERE bank_id = $1", target
        )
        assert carried >= 2
        served = await api.get(f"{BASE}/{target}/attachments/{attachment}")
        assert served.status_code == 200 and served.content == original
        document = (await api.get(f"{BASE}/{target}/documents/trip")).json()
        assert [a["filename"] for a in document["attachments"]] == ["pass.pdf"]
        config = (await api.get(f"{BASE}/{target}/config")).json()
        assert config["config"]["extraction_mode"] == "local"
        # The tombstones came along: the forgotten text is refused here too.
        again = await api.post(
            f"{BASE}/{target}/memories",
            json={"items": [{"content": "Bo adopted a cat named Miso.", "document_id": "x"}]},
        )
        assert again.status_code == 200
        facts = (await api.get(f"{BASE}/{target}/memories/list")).json()["items"]
        assert not any("Miso" in f["text"] for f in facts)

    # A restore never overwrites a bank; a clone names a new one.
    async with serve(app) as url, ApiClient(Configuration(host=url)) as client:
        again = await api.post(f"{BASE}/{bank_id}/clone", params={"target_bank_id": restored})
        assert again.status_code == 409
    bad = await api.post(
        f"{BASE}/{bank_id}/transfer/import",
        files={"file": ("x.zip", b"not a zip", "application/zip")},
        params={"mode": "merge"},
    )
    assert bad.status_code == 400 and bad.json()["field"] == "file"


async def test_document_merge_keeps_forgotten_facts_out(
    app: Starlette, worker: Worker, api: httpx.AsyncClient, bank_id: str
) -> None:
    settings = {"extraction_mode": "local", "enable_observations": False}
    assert (await api.put(f"{BASE}/{bank_id}", json=settings)).status_code == 200
    items = [{"content": text, "document_id": doc} for doc, text in NOTES]
    assert (await api.post(f"{BASE}/{bank_id}/memories", json={"items": items})).status_code == 200
    async with serve(app) as url, ApiClient(Configuration(host=url)) as client:
        documents = DocumentTransferApi(client)
        # hindsight-client marks the document-transfer calls deprecated (transfer/* replace them).
        with pytest.warns(DeprecationWarning):
            submitted = await documents.export_documents(bank_id, document_id=["pets", "work"])
        meta = (await completed_operation(api, bank_id, submitted.operation_id))["result_metadata"]
        archive = bytes(await documents.download_file(meta["storage_key"]))
        # After the export, the bank forgets a fact the archive still holds.
        assert (
            await api.post(f"{BASE}/{bank_id}/forget", json={"text": "Miso"})
        ).status_code == 200
        with pytest.warns(DeprecationWarning):
            merged = await documents.import_documents(
                bank_id, ("docs.zip", archive), on_conflict="new-id"
            )
        result = (await completed_operation(api, bank_id, merged.operation_id))["result_metadata"]
    assert result["documents_imported"] == 2
    listed = (await api.get(f"{BASE}/{bank_id}/documents")).json()["items"]
    ids = sorted(d["id"] for d in listed)
    assert len(ids) == 5 and {"trip", "pets", "work"} <= set(ids)
    facts = (await api.get(f"{BASE}/{bank_id}/memories/list", params={"limit": 100})).json()
    texts = [f["text"] for f in facts["items"]]
    assert not any("Miso" in t for t in texts)
    for document in ids:
        text = (await api.get(f"{BASE}/{bank_id}/documents/{document}")).json()["original_text"]
        assert "Miso" not in text
    assert sum("sourdough" in t for t in texts) == 2  # the original and the merged copy
    gone = await api.get("/v1/default/files/download/export-unknown.zip")
    assert gone.status_code == 404
