"""Reflect without an LLM key: the evidence it would have reasoned over, said plainly; and the
route's input checks."""

from __future__ import annotations

import httpx
from pgvector import Vector
from reflect_support import BASE, configure, reflect, retain, said

from engine.db import Pool
from engine.embedding import Embedder


async def test_without_a_model_reflect_lists_mental_models_and_facts(
    api: httpx.AsyncClient, bank_id: str, pool: Pool, embedder: Embedder
) -> None:
    await configure(api, bank_id, enable_observations=False, directives=["Answer in English."])
    [fact] = await retain(
        api, bank_id, [said("Alice", "I moved to Lisbon in March.", "2024-04-02", "move")]
    )
    model_text = "Alice lives in Lisbon since March 2024."
    async with pool.acquire() as conn:
        await conn.execute(
            "INSERT INTO mental_models (bank_id, id, name, source_query, content, embedding)"
            " VALUES ($1, 'where-alice-lives', 'Home', 'Where does Alice live?', $2, $3)",
            bank_id,
            model_text,
            Vector(embedder.embed([model_text])[0]),
        )

    answer = await reflect(api, bank_id, query="Where does Alice live?", include={"facts": {}})

    assert answer["text"].startswith("No language model is configured")
    assert "[where-alice-lives]" in answer["text"] and f"[{fact}]" in answer["text"]
    based_on = answer["based_on"]
    assert [m["id"] for m in based_on["mental_models"]] == ["where-alice-lives"]
    assert based_on["mental_models"][0]["text"] == model_text
    assert [m["id"] for m in based_on["memories"]] == [fact]
    assert based_on["memories"][0]["document_id"] == "move"
    assert [d["content"] for d in based_on["directives"]] == ["Answer in English."]
    assert answer["usage"]["total_tokens"] == 0
    assert "structured_output_error" not in answer


async def test_without_a_model_structured_output_reports_why_and_trace_is_empty(
    api: httpx.AsyncClient, bank_id: str
) -> None:
    await configure(api, bank_id, enable_observations=False)
    answer = await reflect(
        api,
        bank_id,
        query="What does Bob like?",
        response_schema={"type": "object", "properties": {"likes": {"type": "string"}}},
        include={"tool_calls": {}},
        exclude_mental_models=True,
    )
    assert "Nothing in this bank matches the question." in answer["text"]
    assert "based_on" not in answer  # include given without facts
    assert "no language model" in answer["structured_output_error"]
    assert answer["trace"]["tool_calls"] == [] and answer["trace"]["llm_calls"] == []


async def test_without_a_model_a_question_matching_nothing_lists_the_latest_facts(
    api: httpx.AsyncClient, bank_id: str
) -> None:
    """A broad question ("What do you know about me?") is near no fact, so recall finds
    nothing; the answer shows the bank's latest facts in the request's scope instead of
    nothing at all, latest first."""
    await configure(api, bank_id, enable_observations=False)
    older = await retain(
        api, bank_id, [said("Alice", "I moved to Lisbon in March.", "2024-04-02", "move")]
    )
    newer = await retain(
        api, bank_id, [said("Alice", "I adopted a cat named Miso.", "2024-06-10", "cat")]
    )
    tagged = {**said("Alice", "I started learning the cello.", "2024-07-01", "cello")}
    [other] = await retain(api, bank_id, [{**tagged, "tags": ["music"]}])
    query = "What do you know about me?"
    recalled = await api.post(f"{BASE}/{bank_id}/memories/recall", json={"query": query})
    assert recalled.json()["results"] == []  # the premise: recall finds nothing

    answer = await reflect(api, bank_id, query=query, include={"facts": {}})
    text = answer["text"]
    assert "Nothing in this bank matches the question." in text
    assert "latest facts instead" in text
    shown = [m["id"] for m in answer["based_on"]["memories"]]
    assert shown == [other, *newer, *older]
    assert all(f"[{fact}]" in text for fact in shown)
    assert text.index(f"[{other}]") < text.index(f"[{newer[0]}]") < text.index(f"[{older[0]}]")

    # the request's scope holds: its tags
    scoped = await reflect(
        api, bank_id, query=query, tags=["pets"], tags_match="any_strict", include={"facts": {}}
    )
    assert "based_on" not in scoped or scoped["based_on"]["memories"] == []
    music = await reflect(
        api, bank_id, query=query, tags=["music"], tags_match="any_strict", include={"facts": {}}
    )
    assert [m["id"] for m in music["based_on"]["memories"]] == [other]


async def test_a_missing_bank_is_404(api: httpx.AsyncClient, bank_id: str) -> None:
    response = await api.post(f"{BASE}/{bank_id}/reflect", json={"query": "anything"})
    assert response.status_code == 404, response.text


async def test_bad_input_is_a_4xx_naming_the_field(api: httpx.AsyncClient, bank_id: str) -> None:
    await configure(api, bank_id)
    cases = [
        ({"query": "  "}, 400, "query"),
        ({"query": "x" * 2001}, 400, "query"),
        ({"query": "q", "tag_groups": [{"tags": ["a"]}]}, 400, "tag_groups"),
        ({"query": "q", "response_schema": {"type": "array"}}, 400, "response_schema"),
        ({"query": "q", "context": "c" * 20_001}, 400, "context"),
        ({"query": "q", "budget": "huge"}, 422, "budget"),
        ({"query": "q", "fact_types": ["opinion"]}, 422, "fact_types.0"),
        ({"query": "q", "max_tokens": 0}, 422, "max_tokens"),
        ({}, 422, "query"),
    ]
    for body, status, field in cases:
        response = await api.post(f"{BASE}/{bank_id}/reflect", json=body)
        assert response.status_code == status, (body, response.text)
        assert response.json()["field"] == field, (body, response.text)
