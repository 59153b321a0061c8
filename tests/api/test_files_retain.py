"""`POST .../files/retain`: text, Markdown, HTML and PDF uploads become documents, one async
operation each; hindsight-client's retain_files works unchanged; bad files get a 400 naming
the file."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path

import httpx
from hindsight_client import Hindsight
from starlette.applications import Starlette
from support.openapi import check
from support.serve import serve
from temporalio.worker import Worker

from engine.db import Pool

BASE = "/v1/default/banks"


def tiny_pdf(text: str) -> bytes:
    """A one-page PDF whose page draws `text` (Helvetica), with a correct xref table."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R"
        b" /Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


async def wait_done(api: httpx.AsyncClient, bank: str, operation_ids: list[str]) -> None:
    for operation_id in operation_ids:
        while True:
            status = (await api.get(f"{bank}/operations/{operation_id}")).json()["status"]
            assert status not in ("failed", "cancelled"), status
            if status == "completed":
                break
            await asyncio.sleep(0.05)


async def test_uploads_become_documents(api: httpx.AsyncClient, bank_id: str) -> None:
    doc = (await api.get("/openapi.json")).json()
    bank = f"{BASE}/{bank_id}"
    settings = {"extraction_mode": "local", "enable_observations": False}
    assert (await api.put(bank, json=settings)).status_code == 200
    files = [
        ("files", ("notes.txt", b"Ana adopted a cat named Miso.", "text/plain")),
        ("files", ("plan.md", b"# Plan\n\nThe launch moved to June 3.", "text/markdown")),
        (
            "files",
            (
                "page.html",
                b"<html><script>var x=1;</script><p>Bo plays the cello.</p></html>",
                "text/html",
            ),
        ),
        ("files", ("report.pdf", tiny_pdf("Dee lives in Oslo."), "application/pdf")),
    ]
    meta = {"files_metadata": [{}, {"document_id": "launch", "tags": ["work"]}, {}, {}]}
    response = await api.post(
        f"{bank}/files/retain", files=files, data={"request": json.dumps(meta)}
    )
    body = check(doc, response)
    assert len(body["operation_ids"]) == 4
    await wait_done(api, bank, body["operation_ids"])
    documents = {d["id"] for d in (await api.get(f"{bank}/documents")).json()["items"]}
    assert documents == {"notes.txt", "launch", "page.html", "report.pdf"}
    html = (await api.get(f"{bank}/documents/page.html")).json()
    assert html["original_text"] == "Bo plays the cello."
    pdf = (await api.get(f"{bank}/documents/report.pdf")).json()
    assert "Dee lives in Oslo." in pdf["original_text"]
    launch = (await api.get(f"{bank}/memories/list", params={"document_id": "launch"})).json()
    assert launch["items"][0]["tags"] == ["work"]

    image = await api.post(
        f"{bank}/files/retain", files=[("files", ("x.png", b"\x89PNG", "image/png"))]
    )
    assert image.status_code == 400 and image.json()["field"] == "files[0]"
    broken = await api.post(
        f"{bank}/files/retain",
        files=[("files", ("bad.pdf", b"%PDF-1.4 nonsense", "application/pdf"))],
    )
    assert broken.status_code == 400 and "PDF" in broken.json()["detail"]
    none = await api.post(f"{bank}/files/retain", files={"request": (None, "{}")})
    assert none.status_code == 400 and none.json()["field"] == "files"


async def test_hindsight_client_retain_files(
    app: Starlette, worker: Worker, bank_id: str, tmp_path: Path
) -> None:
    note = tmp_path / "note.md"
    note.write_text("Cy moved to Porto in 2022.")
    async with serve(app) as url:
        client = Hindsight(base_url=url, user_agent="engram-tests/1")
        try:
            await client.acreate_bank(bank_id)
            answer = await client.aretain_files(bank_id, [note], context="notes")
        finally:
            await client.aclose()  # type: ignore[no-untyped-call]
    assert len(answer.operation_ids) == 1


async def test_an_uploaded_original_is_served_until_its_document_is_forgotten(
    api: httpx.AsyncClient, pool: Pool, bank_id: str
) -> None:
    doc = (await api.get("/openapi.json")).json()
    bank = f"{BASE}/{bank_id}"
    assert (await api.put(bank, json={"extraction_mode": "local"})).status_code == 200
    pdf = tiny_pdf("Dee lives in Oslo.")
    files = [
        ("files", ("report.pdf", pdf, "application/pdf")),
        ("files", ("copy.pdf", pdf, "application/pdf")),
    ]
    body = check(doc, await api.post(f"{bank}/files/retain", files=files))
    await wait_done(api, bank, body["operation_ids"])
    report = check(doc, await api.get(f"{bank}/documents/report.pdf"))
    [attachment] = report["attachments"]
    assert attachment["filename"] == "report.pdf" and attachment["byte_size"] == len(pdf)
    assert attachment["hash"] == hashlib.sha256(pdf).hexdigest()
    served = await api.get(attachment["url"])
    assert served.status_code == 200 and served.content == pdf
    assert served.headers["content-type"] == "application/pdf"
    # The same bytes are kept once; forgetting one document keeps the other's original.
    copy = (await api.get(f"{bank}/documents/copy.pdf")).json()
    assert copy["attachments"][0]["url"] == attachment["url"]
    assert (await api.delete(f"{bank}/documents/report.pdf")).status_code == 200
    assert (await api.get(attachment["url"])).content == pdf
    # A forget that takes a fact of the document drops its original (it holds the text).
    facts = (await api.get(f"{bank}/memories/list", params={"document_id": "copy.pdf"})).json()
    forgotten = await api.post(f"{bank}/forget", json={"memory_ids": [facts["items"][0]["id"]]})
    assert forgotten.status_code == 200, forgotten.text
    assert (await api.get(attachment["url"])).status_code == 404
    async with pool.acquire() as conn:
        kept = await conn.fetchval("SELECT count(*) FROM stored_files WHERE bank_id = $1", bank_id)
    assert kept == 0  # the bytes went with the last document that used them
    other = await api.get(f"{BASE}/other-{bank_id}/attachments/{attachment['id']}")
    assert other.status_code == 404
