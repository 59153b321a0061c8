"""The llm extraction path end to end, driven by the scripted OpenAI-compatible server."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from support.fake_openai import FakeOpenAI, HTTPError, Raw, Reply

from engine.settings import LLMSettings

BASE = "/v1/default/banks"

GOOD = {
    "facts": [
        {
            "text": "Caroline went to an LGBTQ support group on 7 May 2023.",
            "fact_type": "experience",
            "who": ["Caroline"],
            "what": "went to an LGBTQ support group",
            "where": None,
            "when": "yesterday",
            "why": None,
            "occurred_start": "2023-05-07",
            "occurred_end": "2023-05-07",
            "entities": [{"name": "Caroline", "kind": "person"}],
            "causes": [],
        },
        {
            "text": "Caroline felt accepted at the support group.",
            "fact_type": "experience",
            "who": ["Caroline"],
            "what": "felt accepted",
            "where": None,
            "when": None,
            "why": None,
            "occurred_start": None,
            "occurred_end": None,
            "entities": [{"name": "Caroline", "kind": "person"}],
            "causes": [0],
        },
    ]
}


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def llm_settings(fake: FakeOpenAI) -> LLMSettings:
    return LLMSettings(api_key="test-key", base_url=fake.base_url, model="fake", timeout_s=10)


async def retain(api: httpx.AsyncClient, bank: str) -> httpx.Response:
    return await api.post(
        f"{BASE}/{bank}/memories",
        json={
            "items": [
                {
                    "content": (
                        "Caroline: I went to a LGBTQ support group yesterday. I felt accepted."
                    ),
                    "timestamp": "2023-05-08T13:56:00Z",
                    "context": "chat between Caroline and Melanie",
                    "metadata": {"dia_id": "D1:3"},
                    "document_id": "chat",
                }
            ]
        },
    )


async def test_server_errors_and_invalid_output_are_retried_then_facts_stored(
    api: httpx.AsyncClient, bank_id: str, fake: FakeOpenAI
) -> None:
    start = len(fake.requests)
    fake.push(HTTPError(500), Raw("this is not {json"), Reply(GOOD))
    response = await retain(api, bank_id)
    assert response.status_code == 200, response.text
    assert response.json()["facts_added"] == 2
    requests = fake.requests[start:]
    assert len(requests) == 3  # the 500, the invalid answer, the re-ask
    prompt = " ".join(str(m.get("content")) for m in requests[-1]["messages"])
    assert "2023-05-08" in prompt and "chat between Caroline and Melanie" in prompt
    assert "Metadata: dia_id: D1:3" in prompt  # item metadata reaches the extractor
    items = (await api.get(f"{BASE}/{bank_id}/memories/list")).json()["items"]
    by_text: dict[str, dict[str, Any]] = {i["text"]: i for i in items}
    first = by_text["Caroline went to an LGBTQ support group on 7 May 2023."]
    assert first["occurred_start"].startswith("2023-05-07")
    assert first["fact_type"] == "experience"
    assert first["entities"] == "Caroline"
    detail = (await api.get(f"{BASE}/{bank_id}/memories/{first['id']}")).json()
    assert any(link["type"] == "causal" for link in detail["links"])


async def test_a_rejected_request_fails_the_operation_and_stores_nothing(
    api: httpx.AsyncClient, bank_id: str, fake: FakeOpenAI
) -> None:
    # Twice: a 400 to a json_schema request is first retried with json_object.
    rejected = HTTPError(400, "model does not exist", "invalid_request_error")
    fake.push(rejected, rejected)
    response = await retain(api, bank_id)
    assert response.status_code == 500
    body = response.json()
    assert "model does not exist" in body["detail"]
    operation = (await api.get(f"{BASE}/{bank_id}/operations/{body['operation_id']}")).json()
    assert operation["status"] == "failed"
    assert "model does not exist" in operation["error_message"]
    assert (await api.get(f"{BASE}/{bank_id}/memories/list")).json()["items"] == []


async def test_dry_run_extract_previews_the_llm_facts_and_tokens_without_storing(
    api: httpx.AsyncClient, bank_id: str, fake: FakeOpenAI
) -> None:
    fake.push(Reply(GOOD, prompt_tokens=120, completion_tokens=40))
    body = {
        "content": "Caroline: I went to a LGBTQ support group yesterday. I felt accepted.",
        "timestamp": "2023-05-08T13:56:00Z",
        "context": "chat between Caroline and Melanie",
        "metadata": {"dia_id": "D1:3"},
        "retain_extraction_mode": "llm",
    }
    assert (await api.put(f"{BASE}/{bank_id}", json={"name": "dry"})).status_code == 200
    response = await api.post(f"{BASE}/{bank_id}/memories/dry-run-extract", json=body)
    assert response.status_code == 200, response.text
    result = response.json()
    assert [f["text"] for f in result["facts"]] == [
        "Caroline went to an LGBTQ support group on 7 May 2023.",
        "Caroline felt accepted at the support group.",
    ]
    assert result["facts"][0]["entities"] == ["Caroline"]
    assert result["facts"][0]["occurred_start"].startswith("2023-05-07")
    assert result["usage"] == {
        "input_tokens": 120,
        "output_tokens": 40,
        "total_tokens": 160,
        "cached_tokens": 0,
        "thoughts_tokens": 0,
    }
    prompt = " ".join(str(m.get("content")) for m in fake.requests[-1]["messages"])
    assert "Metadata: dia_id: D1:3" in prompt and "chat between Caroline" in prompt
    assert (await api.get(f"{BASE}/{bank_id}/memories/list")).json()["items"] == []
    calls = (await api.get(f"{BASE}/{bank_id}/llm-requests")).json()["items"]
    assert [c["operation"] for c in calls] == ["dry_run_extract"]
