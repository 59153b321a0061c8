"""Export → import into a new bank gives the same facts, and exports the same again."""

from __future__ import annotations

import json
from typing import Any

import httpx
from support.operations import finished_import

from engine.imports.model import SourceFile
from engine.imports.parse import detect_format

BASE = "/v1/default/banks"

LOCOMO_STYLE = [
    {
        "sample_id": "conv-x",
        "conversation": {
            "speaker_a": "Caroline",
            "speaker_b": "Melanie",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {
                    "speaker": "Caroline",
                    "dia_id": "D1:1",
                    "text": "I went to a support group yesterday.",
                },
                {
                    "speaker": "Melanie",
                    "dia_id": "D1:2",
                    "text": "I painted a lake sunrise last week.",
                },
            ],
            "session_2_date_time": "10:00 am on 20 June, 2023",
            "session_2": [
                {
                    "speaker": "Melanie",
                    "dia_id": "D2:1",
                    "text": "We went camping in Oregon last weekend.",
                    "blip_caption": "a photo of a tent",
                },
                {
                    "speaker": "Caroline",
                    "dia_id": "D2:2",
                    "text": "My friend Jon opened a dance studio in Berlin.",
                },
            ],
        },
    }
]


async def import_content(api: httpx.AsyncClient, bank: str, content: str) -> dict[str, Any]:
    response = await api.post(f"{BASE}/{bank}/import", json={"content": content})
    assert response.status_code == 202, response.text
    return await finished_import(api, response.json()["operation_id"])


async def facts(api: httpx.AsyncClient, bank: str) -> list[tuple[str, str | None, str | None]]:
    response = await api.get(f"{BASE}/{bank}/memories/list", params={"limit": "1000"})
    assert response.status_code == 200
    return sorted(
        (f["text"], f["mentioned_at"], f["document_id"])
        for f in response.json()["items"]
        if f["fact_type"] != "observation"  # consolidation adds these on its own schedule
    )


async def export(api: httpx.AsyncClient, bank: str) -> str:
    response = await api.get(f"{BASE}/{bank}/export")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/x-ndjson")
    return response.text


async def test_export_then_import_into_a_new_bank_round_trips(
    api: httpx.AsyncClient, bank_id: str
) -> None:
    notes = "# Trip\n\nDan collects vintage synthesizers and owns a Moog from 1974."
    first = await import_content(api, bank_id, json.dumps(LOCOMO_STYLE))
    assert first["status"] == "completed" and first["formats"] == ["locomo"]
    await import_content(api, bank_id, notes)
    original = await facts(api, bank_id)
    exported = await export(api, bank_id)
    assert detect_format(SourceFile("", exported)) == "jsonl"
    records = [json.loads(line) for line in exported.splitlines()]
    assert {r["document_id"] for r in records} >= {"conv-x"}
    copy = await import_content(api, f"{bank_id}-copy", exported)
    assert copy["status"] == "completed", copy
    assert await facts(api, f"{bank_id}-copy") == original
    assert any(
        "2023-05-07" in (text + (m or "")) or "7 May 2023" in text for text, m, _ in original
    )
    assert await export(api, f"{bank_id}-copy") == exported


async def test_exporting_an_unknown_bank_is_404(api: httpx.AsyncClient) -> None:
    response = await api.get(f"{BASE}/no-such-bank/export")
    assert response.status_code == 404
