"""hindsight-client's `reflect` works unchanged against Engram: the scripted model answers
through a real tool call, and the client parses text, based_on, structured output, usage and
the trace."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from hindsight_client import Hindsight
from hindsight_client_api.exceptions import NotFoundException
from starlette.applications import Starlette
from support.fake_openai import FakeOpenAI, Reply, ToolCall, ToolCalls
from support.serve import serve
from temporalio.worker import Worker

from engine.settings import LLMSettings


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def llm_settings(fake: FakeOpenAI) -> LLMSettings:
    return LLMSettings(api_key="test-key", base_url=fake.base_url, model="fake", timeout_s=30)


@pytest.fixture
async def url(app: Starlette, worker: Worker) -> AsyncIterator[str]:
    async with serve(app) as base:
        yield base


@pytest.fixture
async def client(url: str) -> AsyncIterator[Hindsight]:
    hindsight = Hindsight(base_url=url, user_agent="engram-tests/1")
    try:
        yield hindsight
    finally:
        await hindsight.aclose()  # type: ignore[no-untyped-call]


async def test_reflect_round_trip(
    client: Hindsight, url: str, bank_id: str, fake: FakeOpenAI
) -> None:
    await client.acreate_bank(bank_id, disposition_skepticism=5)
    async with httpx.AsyncClient(base_url=url) as raw:
        # Engram's own settings: local extraction and no consolidation, so only reflect
        # talks to the scripted model.
        response = await raw.put(
            f"/v1/default/banks/{bank_id}",
            json={
                "extraction_mode": "local",
                "enable_observations": False,
                "directives": ["Cite dates."],
            },
        )
        assert response.status_code == 200, response.text
    await client.aretain(
        bank_id, "Caroline: I went to a support group yesterday.", timestamp="2023-05-08T13:56:00Z"
    )
    listed = await client.alist_memories(bank_id)
    fact_ids = [m.id for m in listed.items]
    assert fact_ids
    done = {"answer": "Caroline went to a support group on 7 May 2023.", "ids": fact_ids}
    fake.push(
        ToolCalls((ToolCall("recall", json.dumps({"query": "support group"})),)),
        ToolCalls((ToolCall("done", json.dumps(done)),)),
        Reply({"attended": True}),
    )
    answer = await client.areflect(
        bank_id,
        "Did Caroline go to the support group?",
        include_facts=True,
        include_tool_calls=True,
        response_schema={
            "type": "object",
            "properties": {"attended": {"type": "boolean"}},
            "required": ["attended"],
        },
    )
    assert answer.text == "Caroline went to a support group on 7 May 2023."
    assert answer.based_on is not None and answer.based_on.memories is not None
    assert [m.id for m in answer.based_on.memories] == fact_ids
    assert "support group" in answer.based_on.memories[0].text
    assert [d.content for d in answer.based_on.directives or []] == ["Cite dates."]
    assert answer.structured_output == {"attended": True}
    assert answer.usage is not None and (answer.usage.total_tokens or 0) > 0
    assert answer.trace is not None and answer.trace.tool_calls is not None
    assert [c.tool for c in answer.trace.tool_calls] == ["recall", "done"]
    assert answer.trace.tool_calls[0].output is not None


async def test_reflect_on_a_missing_bank_is_not_found(client: Hindsight, bank_id: str) -> None:
    with pytest.raises(NotFoundException):
        await client.areflect(bank_id, "anything")
