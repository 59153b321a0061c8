"""Transfer archives have their own body limit (ENGRAM_MAX_ARCHIVE_BYTES), above the
request limit (ENGRAM_MAX_BODY_BYTES): an archive larger than a request may be imports."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from support.operations import completed_operation

from engine.settings import LLMSettings, SecuritySettings, Settings

BASE = "/v1/default/banks"
MAX_BODY = 16_000
MAX_ARCHIVE = 4_000_000


@pytest.fixture
def settings(
    tmp_path: Path, database_url: str, task_queue: str, llm_settings: LLMSettings
) -> Settings:
    security = SecuritySettings(max_body_bytes=MAX_BODY, max_archive_bytes=MAX_ARCHIVE)
    return Settings(
        home=tmp_path,
        database_url=database_url,
        task_queue=task_queue,
        llm=llm_settings,
        security=security,
    )


async def test_an_archive_above_the_body_limit_imports(
    api: httpx.AsyncClient, bank_id: str
) -> None:
    bank = f"{BASE}/{bank_id}"
    assert (await api.put(bank, json={"extraction_mode": "none"})).status_code == 200
    for n in range(4):
        items = [
            {"content": f"Note {n}.{i}: the ferry leaves pier {i} at {n}:00."} for i in range(8)
        ]
        assert (await api.post(f"{bank}/memories", json={"items": items})).status_code == 200
    exported = (await api.post(f"{bank}/document-transfer/export")).json()
    meta = (await completed_operation(api, bank_id, exported["operation_id"]))["result_metadata"]
    archive = (await api.get(meta["download_url"])).content
    assert MAX_BODY < len(archive) < MAX_ARCHIVE
    # A JSON body that size is refused; the archive, on its own limit, is taken.
    big = await api.post(f"{bank}/memories", json={"items": [{"content": "x" * len(archive)}]})
    assert big.status_code == 413 and "ENGRAM_MAX_BODY_BYTES" in big.json()["detail"]
    target = f"{bank_id}-copy"
    assert (await api.put(f"{BASE}/{target}", json={})).status_code == 200
    files = {"file": ("bank.zip", archive, "application/zip")}
    imported = await api.post(f"{BASE}/{target}/document-transfer", files=files)
    assert imported.status_code == 202, imported.text
    result = (await completed_operation(api, target, imported.json()["operation_id"]))[
        "result_metadata"
    ]
    assert result["facts_imported"] == 32
    # Past the archive limit: 413 naming its own setting, whether the size is declared or not.
    huge = {"file": ("huge.zip", b"\0" * (MAX_ARCHIVE + 1), "application/zip")}
    refused = await api.post(f"{BASE}/{target}/document-transfer", files=huge)
    assert refused.status_code == 413 and "ENGRAM_MAX_ARCHIVE_BYTES" in refused.json()["detail"]

    async def chunks() -> Any:
        yield (
            b'--x\r\nContent-Disposition: form-data; name="file"; filename="a.zip"\r\n'
            b"Content-Type: application/zip\r\n\r\n"
        )
        for _ in range(5):
            yield b"\0" * (MAX_ARCHIVE // 4)

    streamed = await api.post(
        f"{BASE}/{target}/document-transfer",
        content=chunks(),
        headers={"content-type": "multipart/form-data; boundary=x"},
    )
    assert streamed.status_code == 413
