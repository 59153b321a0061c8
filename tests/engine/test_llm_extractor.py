"""The `llm` extractor and the LLM client, against a real scripted OpenAI-compatible server."""

from __future__ import annotations

import socket
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from support.fake_openai import (
    Delay,
    FakeOpenAI,
    HTTPError,
    Raw,
    Reply,
    Spec,
    ToolCall,
    ToolCalls,
)

from engine.errors import ExtractionFailed
from engine.extraction.llm import LLMExtraction, LLMExtractor
from engine.llm import LLMClient, LLMRequestError, Usage
from engine.settings import LLMSettings
from engine.types import ExtractedEntity, ExtractedFact, ItemContext

WRITTEN = datetime(2024, 3, 5, 14, 0, tzinfo=UTC)  # a Tuesday
ITEM = ItemContext(mentioned_at=WRITTEN, context="chat with a friend", speaker="Alice")
TEXT = "Yesterday I missed the train in Paris, so I was late to my meeting with Bob at Acme."
GOOD = {
    "facts": [
        {
            "text": "Alice missed the train in Paris on 4 March 2024.",
            "fact_type": "experience",
            "who": ["Alice"],
            "what": "missed the train",
            "where": "Paris",
            "when": "yesterday",
            "why": None,
            "occurred_start": "2024-03-04",
            "occurred_end": "2024-03-04",
            "entities": [{"name": "Paris", "kind": "place"}],
            "causes": [],
        },
        {
            "text": "Alice was late to her meeting with Bob at Acme on 4 March 2024.",
            "fact_type": "experience",
            "who": ["Alice", "Bob"],
            "what": "late to a meeting",
            "where": None,
            "when": "yesterday",
            "why": "she missed the train",
            "occurred_start": "2024-03-04T09:00:00Z",
            "occurred_end": "2024-03-04T10:30:00Z",
            "entities": [
                {"name": "Bob", "kind": "person"},
                {"name": "Acme", "kind": "organization"},
            ],
            "causes": [0],
        },
    ]
}


def settings(fake: FakeOpenAI, timeout_s: float = 10.0) -> LLMSettings:
    return LLMSettings(api_key="test-key", base_url=fake.base_url, timeout_s=timeout_s)


async def extract(script: list[Spec], item: ItemContext = ITEM) -> tuple[LLMExtraction, FakeOpenAI]:
    with FakeOpenAI(script) as fake:
        async with LLMClient(settings(fake)) as client:
            result = await LLMExtractor(client).extract_with_usage(TEXT, item)
    return result, fake


async def request_error(script: list[Spec], timeout_s: float = 10.0) -> LLMRequestError:
    with FakeOpenAI(script) as fake:
        async with LLMClient(settings(fake, timeout_s)) as client:
            with pytest.raises(LLMRequestError) as caught:
                await LLMExtractor(client).extract(TEXT, ITEM)
    return caught.value


def user_message(request: dict[str, Any]) -> str:
    content: str = request["messages"][-1]["content"]
    return content


async def test_good_response_becomes_facts_with_dates_entities_and_causes() -> None:
    result, _ = await extract([Reply(GOOD)])
    missed, late = result.facts
    assert missed == ExtractedFact(
        text="Alice missed the train in Paris on 4 March 2024.",
        fact_type="experience",
        who=["Alice"],
        what="missed the train",
        where="Paris",
        when="yesterday",
        occurred_start=datetime(2024, 3, 4, tzinfo=UTC),
        occurred_end=datetime(2024, 3, 5, tzinfo=UTC),  # half-open: the whole day
        entities=[ExtractedEntity("Paris", "place")],
    )
    assert late.why == "she missed the train"
    assert (late.occurred_start, late.occurred_end) == (
        datetime(2024, 3, 4, 9, 0, tzinfo=UTC),
        datetime(2024, 3, 4, 10, 30, tzinfo=UTC),
    )
    assert late.entities == [
        ExtractedEntity("Bob", "person"),
        ExtractedEntity("Acme", "organization"),
    ]
    assert late.causes == [0]
    assert result.attempts == 1


async def test_request_carries_timestamp_context_speaker_and_schema() -> None:
    _, fake = await extract([Reply(GOOD)])
    (request,) = fake.requests
    user = user_message(request)
    assert "Today is Tuesday, 5 March 2024" in user
    assert "2024-03-05T14:00:00+00:00" in user
    assert '"yesterday" means 2024-03-04' in user
    assert "Context: chat with a friend" in user
    assert "Speaker: Alice" in user
    assert TEXT in user
    assert request["response_format"]["type"] == "json_schema"
    schema = request["response_format"]["json_schema"]["schema"]
    assert "occurred_start" in schema["properties"]["facts"]["items"]["properties"]


async def test_missing_timestamp_tells_the_model_there_is_no_date() -> None:
    _, fake = await extract([Reply({"facts": []})], ItemContext(mentioned_at=None))
    user = user_message(fake.requests[0])
    assert "The text has no date" in user
    assert "Today is" not in user


async def test_fenced_json_with_trailing_commas_is_repaired() -> None:
    content = '```json\n{"facts": [{"text": "Bob works at Acme.", "who": ["Bob",],},],}\n```'
    result, fake = await extract([Reply(content)])
    assert [f.text for f in result.facts] == ["Bob works at Acme."]
    assert result.facts[0].who == ["Bob"]
    assert len(fake.requests) == 1


async def test_top_level_list_and_loose_values_are_repaired() -> None:
    content = [
        {"text": "  ", "causes": []},  # dropped: empty text
        {
            "text": "Bob moved to Lisbon.",
            "fact_type": "observation",  # unknown here: becomes world
            "occurred_start": "May 2023",
            "occurred_end": "March 4, 2023",  # before the start: swapped
            "entities": ["Lisbon", {"name": "Bob", "kind": "people"}, {"kind": "place"}],
        },
        {"text": "Bob is happy there.", "causes": [1, 7, "x", 2, 0]},
    ]
    result, _ = await extract([Reply(content)])
    moved, happy = result.facts
    assert moved.fact_type == "world"
    assert (moved.occurred_start, moved.occurred_end) == (
        datetime(2023, 3, 4, tzinfo=UTC),
        datetime(2023, 6, 1, tzinfo=UTC),
    )
    assert moved.entities == [ExtractedEntity("Lisbon"), ExtractedEntity("Bob", "person")]
    # index 1 ("moved") is now 0; the empty fact, itself and out-of-range indexes are gone
    assert happy.causes == [0]


async def test_naive_dates_take_the_items_timezone() -> None:
    paris = timezone(timedelta(hours=1))
    item = ItemContext(mentioned_at=datetime(2024, 3, 5, 14, 0, tzinfo=paris))
    content = {"facts": [{"text": "Bob called.", "occurred_start": "2024-03-05T09:15:00"}]}
    result, _ = await extract([Reply(content)], item)
    assert result.facts[0].occurred_start == datetime(2024, 3, 5, 9, 15, tzinfo=paris)
    assert result.facts[0].occurred_end is None


async def test_explicit_empty_list_is_a_legit_empty_result() -> None:
    result, fake = await extract([Reply({"facts": []})])
    assert result.facts == []
    assert len(fake.requests) == 1


async def test_garbage_then_good_reasks_once_with_the_reason() -> None:
    result, fake = await extract(
        [Reply("Sure! Here are the facts you asked for.", prompt_tokens=7), Reply(GOOD)]
    )
    assert len(result.facts) == 2
    assert result.attempts == 2
    first, second = fake.requests
    assert "previous output was invalid because" not in user_message(first)
    assert "previous output was invalid because the output is not valid JSON" in user_message(
        second
    )
    assert result.usage.prompt_tokens > 7  # both calls counted


async def test_garbage_twice_raises_extraction_failed() -> None:
    with FakeOpenAI([Reply("not json"), Reply({"facts": [1, 2]})]) as fake:
        async with LLMClient(settings(fake)) as client:
            with pytest.raises(ExtractionFailed, match=r"facts\[0\] is a int"):
                await LLMExtractor(client).extract(TEXT, ITEM)
    assert len(fake.requests) == 2


async def test_facts_that_are_all_empty_count_as_garbage() -> None:
    with FakeOpenAI([Reply({"facts": [{"text": ""}]})] * 2) as fake:
        async with LLMClient(settings(fake)) as client:
            with pytest.raises(ExtractionFailed, match="empty text"):
                await LLMExtractor(client).extract(TEXT, ITEM)


async def test_truncated_output_is_reasked_as_cut_off() -> None:
    result, fake = await extract([Reply('{"facts": [{"text": "Bob', "length"), Reply(GOOD)])
    assert len(result.facts) == 2
    assert "cut off at the token limit" in user_message(fake.requests[1])


@pytest.mark.parametrize("status", [500, 503, 429, 408])
async def test_server_errors_and_rate_limits_are_retryable(status: int) -> None:
    error = await request_error([HTTPError(status)])
    assert (error.retryable, error.status) == (True, status)


async def test_bad_request_is_not_retryable() -> None:
    # A 400 first costs the json_object fallback; a 400 there too is final.
    error = await request_error([HTTPError(400, "bad"), HTTPError(400, "still bad")])
    assert (error.retryable, error.status) == (False, 400)
    assert "still bad" in str(error)


async def test_auth_error_is_not_retryable_and_not_retried() -> None:
    with FakeOpenAI([HTTPError(401, "bad key")]) as fake:
        async with LLMClient(settings(fake)) as client:
            with pytest.raises(LLMRequestError) as caught:
                await LLMExtractor(client).extract(TEXT, ITEM)
    assert caught.value.retryable is False
    assert len(fake.requests) == 1  # the client does not retry on its own


async def test_slow_response_beyond_the_timeout_is_retryable() -> None:
    started = datetime.now(UTC)
    error = await request_error([Delay(5.0, Reply(GOOD))], timeout_s=0.3)
    assert error.retryable is True
    assert "timed out" in str(error)
    assert datetime.now(UTC) - started < timedelta(seconds=3)


async def test_unreachable_server_is_retryable() -> None:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    unreachable = LLMSettings(api_key="k", base_url=f"http://127.0.0.1:{port}/v1")
    async with LLMClient(unreachable) as client:
        with pytest.raises(LLMRequestError) as caught:
            await LLMExtractor(client).extract(TEXT, ITEM)
    assert caught.value.retryable is True


async def test_malformed_http_body_is_retryable() -> None:
    error = await request_error([Raw("<html>bad gateway</html>", content_type="text/html")])
    assert error.retryable is True


def reject_json_schema(request: dict[str, Any]) -> Spec:
    if request["response_format"]["type"] == "json_schema":
        return HTTPError(400, "response_format json_schema is not supported")
    return Reply(GOOD)


async def test_json_schema_rejected_falls_back_to_json_object() -> None:
    with FakeOpenAI(responder=reject_json_schema) as fake:
        async with LLMClient(settings(fake)) as client:
            facts = await LLMExtractor(client).extract(TEXT, ITEM)
            again = await LLMExtractor(client).extract(TEXT, ITEM)
    assert len(facts) == 2 == len(again)
    formats = [r["response_format"]["type"] for r in fake.requests]
    assert formats == ["json_schema", "json_object", "json_object"]  # remembered
    assert '"occurred_start"' in fake.requests[1]["messages"][0]["content"]


async def test_complete_json_returns_object_and_usage() -> None:
    reply = Reply('```\n{"answer": 42,}\n```', prompt_tokens=11, completion_tokens=3)
    with FakeOpenAI([reply]) as fake:
        async with LLMClient(settings(fake)) as client:
            value, usage = await client.complete_json("Reply in JSON.", "?", "answer", {})
    assert value == {"answer": 42}
    assert usage == Usage(11, 3)


async def test_chat_parses_tool_calls() -> None:
    calls = (ToolCall("recall", '{"query": "Bob"}'), ToolCall("done", "{}"))
    tools: Any = [{"type": "function", "function": {"name": "recall", "parameters": {}}}]
    with FakeOpenAI([ToolCalls(calls), Reply("Bob works at Acme.")]) as fake:
        async with LLMClient(settings(fake)) as client:
            first = await client.chat([{"role": "user", "content": "Who is Bob?"}], tools)
            tool_result: Any = {
                "role": "tool",
                "tool_call_id": first.tool_calls[0].id,
                "content": "Bob works at Acme.",
            }
            messages: Any = [first.as_message(), tool_result]
            second = await client.chat(messages, tools)
    assert first.finish_reason == "tool_calls"
    assert [(c.name, c.arguments) for c in first.tool_calls] == [
        ("recall", '{"query": "Bob"}'),
        ("done", "{}"),
    ]
    assert fake.requests[0]["tools"][0]["function"]["name"] == "recall"
    sent_back = fake.requests[1]["messages"][0]["tool_calls"][0]
    assert sent_back["function"] == {"name": "recall", "arguments": '{"query": "Bob"}'}
    assert (second.content, second.tool_calls) == ("Bob works at Acme.", [])
