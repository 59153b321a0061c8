"""An import survives its worker being killed: a new worker finishes it with exactly the
facts of an undisturbed import, none missing and none doubled."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from support.operations import finished_import
from support.waiting import until
from support.workers import kill, production_worker, stores_held, worker_process
from temporalio.testing import WorkflowEnvironment

from engine.db import Pool
from engine.embedding import Embedder
from engine.settings import Settings

BASE = "/v1/default/banks"


def history(conversations: int, days: int) -> str:
    people = ["Ana", "Bruno", "Chen", "Dara"]
    places = ["Lisbon", "Osaka", "Quito", "Tallinn"]
    lines = []
    for c in range(conversations):
        for d in range(days):
            stamp = f"2024-{1 + c % 9:02d}-{10 + d:02d}T09:00:00Z"
            for t in range(3):
                lines.append(
                    json.dumps(
                        {
                            "conversation_id": f"chat-{c}",
                            "speaker": people[(c + t) % 4],
                            "content": f"I went to {places[(c + d + t) % 4]} with "
                            f"{people[(t + 1) % 4]} on day {d} and we tried {c * 7 + t} dishes.",
                            "timestamp": stamp,
                        }
                    )
                )
    return "\n".join(lines)


async def fact_texts(api: httpx.AsyncClient, bank: str) -> list[str]:
    response = await api.get(f"{BASE}/{bank}/memories/list", params={"limit": "1000"})
    assert response.status_code == 200
    # Observations (the consolidation an import requests) come on their own schedule.
    return sorted(
        item["text"] for item in response.json()["items"] if item["fact_type"] != "observation"
    )


async def status(api: httpx.AsyncClient, operation_id: str) -> dict[str, Any]:
    response = await api.get(f"/v1/default/imports/{operation_id}")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


@pytest.mark.timeout(300)
async def test_a_worker_killed_mid_import_is_replaced_and_nothing_is_lost_or_doubled(
    plain_api: httpx.AsyncClient,
    temporal_env: WorkflowEnvironment,
    settings: Settings,
    pool: Pool,
    embedder: Embedder,
    cpu: ThreadPoolExecutor,
    bank_id: str,
) -> None:
    content = history(conversations=16, days=4)
    with worker_process(settings, temporal_env) as victim:
        async with stores_held(pool):
            response = await plain_api.post(f"{BASE}/{bank_id}/import", json={"content": content})
            assert response.status_code == 202, response.text
            operation_id = response.json()["operation_id"]
            await until(  # the worker has extracted facts; none can be stored
                lambda: pool.fetchval(
                    "SELECT count(*) FROM staged_facts WHERE operation_id = $1", operation_id
                ),
                lambda staged: staged > 0,
                "facts staged by the worker to be killed",
            )
            kill(victim)
        progress = (await status(plain_api, operation_id))["progress"]
        assert progress["documents_done"] == 0, progress
        async with production_worker(temporal_env, settings, pool, embedder, cpu):
            final = await finished_import(plain_api, operation_id, timeout=200)
            clean = await plain_api.post(
                f"{BASE}/{bank_id}-clean/import", json={"content": content}
            )
            assert clean.status_code == 202, clean.text
            clean_final = await finished_import(
                plain_api, clean.json()["operation_id"], timeout=200
            )
    assert final["status"] == clean_final["status"] == "completed", (final, clean_final)
    texts = await fact_texts(plain_api, bank_id)
    assert texts == await fact_texts(plain_api, f"{bank_id}-clean")
    assert len(texts) == len(set(texts)) > 0
    assert final["progress"]["documents_done"] == 16
    assert final["result"]["facts_added"] == len(texts)
