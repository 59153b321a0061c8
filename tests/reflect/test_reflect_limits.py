"""The wall-clock and context limits end the tool loop with a synthesis call without tools.

These limits are not wire fields, so the tests start `ReflectWorkflow` directly, as mental
model refreshes do."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import httpx
import pytest
from reflect_support import configure, retain, said
from support.fake_openai import Delay, FakeOpenAI, Reply, ToolCall, ToolCalls
from temporalio.testing import WorkflowEnvironment

from engine.reflect.answer import estimate_tokens
from engine.reflect.payloads import ReflectInput, ReflectOutput
from engine.reflect.prompt import system_prompt, user_prompt
from engine.settings import LLMSettings, Settings
from engine.store.banks import Disposition
from workflows.reflect import ReflectWorkflow


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def llm_settings(fake: FakeOpenAI) -> LLMSettings:
    return LLMSettings(api_key="test-key", base_url=fake.base_url, model="fake", timeout_s=30)


async def run(env: WorkflowEnvironment, settings: Settings, request: ReflectInput) -> ReflectOutput:
    return await env.client.execute_workflow(
        ReflectWorkflow.run,
        request,
        id=f"reflect-test-{uuid.uuid4()}",
        task_queue=settings.task_queue,
    )


async def test_the_wall_clock_limit_forces_a_synthesis_without_tools(
    api: httpx.AsyncClient,
    bank_id: str,
    fake: FakeOpenAI,
    temporal_env: WorkflowEnvironment,
    settings: Settings,
) -> None:
    await configure(api, bank_id, extraction_mode="local", enable_observations=False)
    [fact] = await retain(api, bank_id, [said("Ana", "I run marathons.", "2024-03-01", "run")])
    before = len(fake.requests)
    slow_recall = ToolCalls((ToolCall("recall", json.dumps({"query": "Ana sport"})),))
    fake.push(Delay(2.0, then=slow_recall), Reply(f"Ana runs marathons [{fact}]."))

    output = await run(
        temporal_env,
        settings,
        ReflectInput(
            bank_id,
            "What sport does Ana do?",
            datetime.now(UTC),
            budget="high",
            wall_clock_limit_s=1.0,
            include_trace=True,
        ),
    )

    sent = fake.requests[before:]
    assert len(sent) == 2 and "tools" in sent[0] and "tools" not in sent[1]
    assert (
        "I run marathons" in sent[1]["messages"][-1]["content"]
        or "runs marathons" in (sent[1]["messages"][-1]["content"])
    )
    assert output.trace is not None and output.trace["stop_reason"] == "wall_clock_limit"
    assert output.text == f"Ana runs marathons [{fact}]."
    assert [e.id for e in output.based_on] == [fact]


async def test_the_context_limit_forces_a_synthesis_without_tools(
    api: httpx.AsyncClient,
    bank_id: str,
    fake: FakeOpenAI,
    temporal_env: WorkflowEnvironment,
    settings: Settings,
) -> None:
    await configure(api, bank_id, extraction_mode="local", enable_observations=False)
    await retain(api, bank_id, [said("Ana", "I run marathons.", "2024-03-01", "run")])
    before = len(fake.requests)
    recall = ToolCalls((ToolCall("recall", json.dumps({"query": "Ana sport"})),))
    fake.push(recall, Reply("Ana runs marathons."))
    now = datetime.now(UTC)
    query = "What sport does Ana do?"
    opening = [
        {"role": "system", "content": system_prompt("", [], Disposition(), now)},
        {"role": "user", "content": user_prompt(query, "")},
    ]
    # The opening prompt fits; with the assistant turn and one tool result it does not.
    limit = estimate_tokens(opening) + 1

    output = await run(
        temporal_env,
        settings,
        ReflectInput(
            bank_id,
            query,
            now,
            budget="high",
            context_limit_tokens=limit,
            include_trace=True,
        ),
    )

    sent = fake.requests[before:]
    assert output.trace is not None and output.trace["stop_reason"] == "context_limit"
    assert len(sent) == 2 and "tools" in sent[0] and "tools" not in sent[1]
    assert output.text == "Ana runs marathons."
