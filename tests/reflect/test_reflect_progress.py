"""Watching a reflect question while it runs: `GET .../reflect/{request_id}` lists the steps
taken so far (the scripted model is held on its second turn until the test has seen the
first tool call), then reports completion; a reused request id is refused (409)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from reflect_support import BASE, configure, retain, said
from support.fake_openai import FakeOpenAI, Reply, Spec, ToolCall, ToolCalls
from support.operations import body_of
from support.waiting import until

from engine.settings import LLMSettings

GATE = threading.Event()


def held_answer(request: dict[str, Any]) -> Spec:
    """The second turn answers only once the test opens the gate (or after 60 s)."""
    GATE.wait(60)
    return Reply("Kai surfs in Ericeira.")


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(responder=held_answer) as server:
        yield server
        GATE.set()


@pytest.fixture
def llm_settings(fake: FakeOpenAI) -> LLMSettings:
    return LLMSettings(api_key="test-key", base_url=fake.base_url, model="fake", timeout_s=90)


async def test_the_steps_of_a_question_can_be_read_while_it_runs(
    api: httpx.AsyncClient, bank_id: str, fake: FakeOpenAI
) -> None:
    await configure(api, bank_id, extraction_mode="local", enable_observations=False)
    await retain(api, bank_id, [said("Kai", "I surf in Ericeira.", "2024-05-10", "d1")])
    fake.push(ToolCalls((ToolCall("recall", json.dumps({"query": "Kai surf"})),)))
    body = {"query": "Where does Kai surf?", "request_id": "console-q-0001"}
    asking = asyncio.create_task(api.post(f"{BASE}/{bank_id}/reflect", json=body))
    try:
        steps = await until(
            lambda: body_of(api, f"{BASE}/{bank_id}/reflect/console-q-0001"),
            lambda steps: steps["tool_calls"],
            "the first tool call shown",
            every=0.05,
        )
        assert steps["status"] == "running"
        [recalled] = steps["tool_calls"]
        assert recalled["tool"] == "recall" and recalled["input"]["query"] == "Kai surf"
        assert "Ericeira" in json.dumps(recalled["output"])
        assert steps["iteration"] == 1 or steps["stage"] == "thinking"
    finally:
        GATE.set()
    answer = await asking
    assert answer.status_code == 200, answer.text
    assert answer.json()["text"] == "Kai surfs in Ericeira."

    done = (await api.get(f"{BASE}/{bank_id}/reflect/console-q-0001")).json()
    assert done["status"] == "completed" and done["stage"] == "done"
    assert [c["scope"] for c in done["llm_calls"]] == ["agent_1", "agent_2"]
    again = await api.post(f"{BASE}/{bank_id}/reflect", json=body)
    assert again.status_code == 409, again.text
    bad = await api.post(f"{BASE}/{bank_id}/reflect", json={**body, "request_id": "a/b"})
    assert bad.status_code == 422 and "request_id" in bad.text
