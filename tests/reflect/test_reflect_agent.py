"""ReflectWorkflow driven end to end through the HTTP API by the scripted model: real tool
calls, a bad tool name, bad JSON arguments, a timed-out call, budget caps, disposition."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from pgvector import Vector
from reflect_support import (
    BASE,
    configure,
    reflect,
    retain,
    said,
    system_prompt_of,
    tool_results,
)
from support.fake_openai import Delay, FakeOpenAI, HTTPError, Reply, ToolCall, ToolCalls

from engine.db import Pool
from engine.embedding import Embedder
from engine.reflect.prompt import EMPATHY, LITERALISM, SKEPTICISM
from engine.settings import LLMSettings

# The client gives up on a model call after this long; a Delay past it is a timeout.
CLIENT_TIMEOUT_S = 2.0


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def llm_settings(fake: FakeOpenAI) -> LLMSettings:
    return LLMSettings(
        api_key="test-key", base_url=fake.base_url, model="fake", timeout_s=CLIENT_TIMEOUT_S
    )


def call(name: str, arguments: str, tokens: int = 100) -> ToolCalls:
    return ToolCalls((ToolCall(name, arguments),), prompt_tokens=tokens, completion_tokens=10)


async def quiet_bank(api: httpx.AsyncClient, bank: str, **config: Any) -> None:
    """Local extraction and no consolidation: only reflect talks to the scripted model."""
    await configure(api, bank, extraction_mode="local", enable_observations=False, **config)


async def test_tool_loop_survives_bad_calls_and_a_timeout_and_cites_what_it_used(
    api: httpx.AsyncClient, bank_id: str, fake: FakeOpenAI
) -> None:
    await quiet_bank(api, bank_id)
    [async_fact] = await retain(
        api, bank_id, [said("Alice", "I struggle with async Python.", "2024-01-02", "w1")]
    )
    await retain(api, bank_id, [said("Alice", "I adopted a cat named Miso.", "2024-01-05", "w2")])
    before = len(fake.requests)
    fake.push(
        call("search_everything", '{"query": "Alice"}'),
        call("recall", '{"query": "Alice async'),  # cut off: not JSON
        Delay(CLIENT_TIMEOUT_S * 3, then=call("recall", '{"query": "never seen"}')),
        call("recall", json.dumps({"query": "Alice async Python"})),
        call("expand", json.dumps({"memory_id": async_fact, "depth": "document"})),
        call(
            "done",
            json.dumps(
                {"answer": "Alice struggles with async Python.", "ids": [async_fact, "made-up"]}
            ),
        ),
    )

    answer = await reflect(
        api,
        bank_id,
        query="How is Alice doing with async Python?",
        budget="high",
        include={"facts": {}, "tool_calls": {}},
    )

    assert answer["text"] == "Alice struggles with async Python."
    assert [m["id"] for m in answer["based_on"]["memories"]] == [async_fact]  # not "made-up"
    sent = fake.requests[before:]
    assert len(sent) == 6  # five turns, one of them sent twice (timed out, then retried)
    assert all("tools" in r for r in sent)
    assert "unknown tool 'search_everything'" in tool_results(sent[1])[-1]
    assert "not valid JSON" in tool_results(sent[2])[-1]
    assert sent[3]["messages"] == sent[2]["messages"]  # the retry re-sent the same turn
    recalled = json.loads(tool_results(sent[4])[-1])["results"]
    assert async_fact in [r["id"] for r in recalled]
    expanded = json.loads(tool_results(sent[5])[-1])
    assert expanded["document"] == "Alice: I struggle with async Python."
    trace = answer["trace"]
    assert [c["tool"] for c in trace["tool_calls"]] == [
        "search_everything",
        "recall",
        "recall",
        "expand",
        "done",
    ]
    # The timed-out attempt and its retry are one turn: the activity retried, not the loop.
    assert [c["iteration"] for c in trace["tool_calls"]] == [1, 2, 3, 4, 5]
    assert [c["scope"] for c in trace["llm_calls"]] == [f"agent_{i}" for i in range(1, 6)]
    assert trace["stop_reason"] == "done"
    assert trace["tool_calls"][1]["input"] == {"raw_arguments": '{"query": "Alice async'}
    assert "not valid JSON" in trace["tool_calls"][1]["output"]["error"]
    # Usage sums the five answered turns (the timed-out attempt never answered).
    assert answer["usage"] == {
        "input_tokens": 500,
        "output_tokens": 50,
        "total_tokens": 550,
        "cached_tokens": 0,
        "thoughts_tokens": 0,
    }


@pytest.mark.parametrize(("budget", "turns"), [("low", 3), ("mid", 6)])
async def test_the_budget_caps_tool_turns_then_the_answer_is_synthesised(
    api: httpx.AsyncClient, bank_id: str, fake: FakeOpenAI, budget: str, turns: int
) -> None:
    await quiet_bank(api, bank_id)
    [fact] = await retain(
        api, bank_id, [said("Bo", "I play the cello on Sundays.", "2024-02-04", "cello")]
    )
    before = len(fake.requests)
    fake.push(*[call("recall", '{"query": "Bo music"}') for _ in range(turns)])
    fake.push(Reply(f"Bo plays the cello on Sundays [{fact}]."))

    answer = await reflect(
        api,
        bank_id,
        query="What music does Bo play?",
        budget=budget,
        include={"facts": {}, "tool_calls": {"output": budget == "low"}},
    )

    sent = fake.requests[before:]
    assert len(sent) == turns + 1
    outputs = [c["output"] for c in answer["trace"]["tool_calls"]]
    assert len(outputs) == turns
    if budget == "low":
        assert all(fact in [r["id"] for r in o["results"]] for o in outputs)
    else:  # `output: false` asks for the inputs only
        assert outputs == [None] * turns
    assert all("tools" in r for r in sent[:turns]) and "tools" not in sent[-1]
    final_user = sent[-1]["messages"][-1]["content"]
    assert "I play the cello" in final_user or "plays the cello" in final_user
    assert answer["text"] == f"Bo plays the cello on Sundays [{fact}]."
    assert [m["id"] for m in answer["based_on"]["memories"]] == [fact]
    assert answer["trace"]["stop_reason"] == "iteration_limit"
    assert answer["trace"]["llm_calls"][-1]["scope"] == "final"


async def test_disposition_mission_and_directives_shape_the_instructions(
    api: httpx.AsyncClient, bank_id: str, fake: FakeOpenAI
) -> None:
    trusting, skeptic = f"{bank_id}-trusting", f"{bank_id}-skeptic"
    await quiet_bank(
        api,
        trusting,
        disposition_skepticism=1,
        disposition_literalism=1,
        disposition_empathy=5,
    )
    await quiet_bank(
        api,
        skeptic,
        mission="Vet claims about suppliers before purchasing acts on them.",
        disposition_skepticism=5,
        disposition_literalism=5,
        disposition_empathy=1,
        directives=["Never name individual employees."],
    )
    prompts: dict[str, str] = {}
    for bank in (trusting, skeptic):
        before = len(fake.requests)
        fake.push(Reply("Nothing is known."))
        answer = await reflect(api, bank, query="Is Acme reliable?")
        [request] = fake.requests[before:]
        prompts[bank] = system_prompt_of(request)
        assert answer["text"] == "Nothing is known."

    low, high = prompts[trusting], prompts[skeptic]
    assert low != high
    assert SKEPTICISM[5] in high and "demand corroboration" in high
    assert SKEPTICISM[1] in low and "corroboration" not in low
    assert LITERALISM[5] in high and LITERALISM[1] in low
    assert EMPATHY[1] in high and EMPATHY[5] in low
    assert "Vet claims about suppliers" in high and "mission" not in low
    assert "Never name individual employees." in high and "Directives" not in low


async def test_max_tokens_caps_every_model_call(
    api: httpx.AsyncClient, bank_id: str, fake: FakeOpenAI
) -> None:
    await quiet_bank(api, bank_id)
    before = len(fake.requests)
    fake.push(Reply("Short."), Reply("Default."))
    assert (await reflect(api, bank_id, query="Anything?", max_tokens=123))["text"] == "Short."
    assert (await reflect(api, bank_id, query="Anything?"))["text"] == "Default."
    capped, default = fake.requests[before:]
    assert capped["max_tokens"] == 123
    assert default["max_tokens"] == 4096  # Hindsight's default answer budget


async def test_structured_output_is_validated_against_the_callers_schema(
    api: httpx.AsyncClient, bank_id: str, fake: FakeOpenAI
) -> None:
    await quiet_bank(api, bank_id)
    schema = {
        "type": "object",
        "properties": {
            "reliable": {"type": "boolean"},
            "reasons": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["reliable", "reasons"],
        "additionalProperties": False,
    }
    good = {"reliable": False, "reasons": ["late deliveries"]}
    fake.push(Reply("Acme is not reliable: late deliveries."), Reply(good))
    answer = await reflect(api, bank_id, query="Is Acme reliable?", response_schema=schema)
    assert answer["structured_output"] == good and "structured_output_error" not in answer
    structuring = fake.requests[-1]
    assert structuring["response_format"]["json_schema"]["schema"] == schema
    assert "Acme is not reliable" in structuring["messages"][-1]["content"]

    fake.push(Reply("Acme is reliable."), Reply({"reliable": "yes"}))
    answer = await reflect(api, bank_id, query="Is Acme reliable?", response_schema=schema)
    assert answer["text"] == "Acme is reliable."
    assert "structured_output" not in answer
    error = answer["structured_output_error"]
    assert "$.reliable: expected boolean" in error and "$.reasons: is required" in error


async def test_the_agent_reads_mental_models_and_cites_them(
    api: httpx.AsyncClient, bank_id: str, fake: FakeOpenAI, pool: Pool, embedder: Embedder
) -> None:
    await quiet_bank(api, bank_id)
    content = "The team prefers Postgres and does not want a separate vector store."
    async with pool.acquire() as conn:
        for model_id, text in (("stack", content), ("empty", "")):
            await conn.execute(
                "INSERT INTO mental_models (bank_id, id, name, source_query, content, embedding)"
                " VALUES ($1, $2, 'Stack', 'What database does the team prefer?', $3, $4)",
                bank_id,
                model_id,
                text,
                Vector(embedder.embed([text or "nothing"])[0]),
            )
    before = len(fake.requests)
    fake.push(
        call("search_mental_models", '{"query": "database preference"}'),
        call("done", json.dumps({"answer": "Postgres.", "ids": ["stack"]})),
    )
    answer = await reflect(api, bank_id, query="Which database does the team prefer?")

    shown = json.loads(tool_results(fake.requests[before + 1])[-1])["results"]
    assert [m["id"] for m in shown] == ["stack"]  # a model never refreshed is not offered
    assert shown[0]["text"] == content and shown[0]["type"] == "mental_model"
    assert answer["based_on"]["mental_models"] == [
        {"id": "stack", "text": content, "context": "Stack"}
    ]
    assert answer["based_on"]["memories"] == []

    before = len(fake.requests)
    fake.push(Reply("No models here."))
    await reflect(api, bank_id, query="Which database?", exclude_mental_models=True)
    [request] = fake.requests[before:]
    assert "search_mental_models" not in [t["function"]["name"] for t in request["tools"]]


async def test_a_refusal_from_the_model_is_reported_not_retried(
    api: httpx.AsyncClient, bank_id: str, fake: FakeOpenAI
) -> None:
    await quiet_bank(api, bank_id)
    before = len(fake.requests)
    fake.push(HTTPError(400, "context too long", "invalid_request_error"))
    response = await api.post(f"{BASE}/{bank_id}/reflect", json={"query": "Anything new?"})
    assert response.status_code == 500, response.text
    detail = response.json()["detail"]
    assert detail.startswith("reflect failed:") and "HTTP 400" in detail
    assert len(fake.requests) == before + 1


async def test_a_tagged_directive_applies_only_to_questions_scoped_by_its_tags(
    api: httpx.AsyncClient, bank_id: str, fake: FakeOpenAI
) -> None:
    await quiet_bank(api, bank_id)
    directives = f"/v1/default/banks/{bank_id}/directives"
    for body in (
        {"name": "brief", "content": "Answer in one sentence."},
        {"name": "codes", "content": "Quote the project code.", "tags": ["work"]},
    ):
        assert (await api.post(directives, json=body)).status_code in (200, 201)
    prompts: list[str] = []
    for scope in (
        {},
        {"tags": ["work"]},
        {"tags": ["home"]},
        {"tags": ["work"], "tags_match": "exact"},
        {"tags": ["home"], "apply_all_directives": True},
    ):
        before = len(fake.requests)
        fake.push(Reply("Nothing is known."))
        await reflect(api, bank_id, query="What is the plan?", **scope)
        [request] = fake.requests[before:]
        prompts.append(system_prompt_of(request))
    unscoped, work, home, exact, everything = prompts
    assert all("Answer in one sentence." in p for p in prompts)
    assert "Quote the project code." in work and "Quote the project code." in exact
    assert "Quote the project code." not in unscoped and "Quote the project code." not in home
    assert "Quote the project code." in everything  # every active directive, tags aside
