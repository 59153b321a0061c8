"""The llm consolidation path, driven by the scripted OpenAI-compatible server: the model's
proposals are applied only as far as the facts they cite bear them out."""

from __future__ import annotations

import json
import re
import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from consolidation_support import BASE, configure, memory, observations, retain, wait_consolidated
from support.fake_openai import FakeOpenAI, HTTPError, Reply, Spec

from engine.settings import LLMSettings

FACT_LINE = re.compile(r"^\[([0-9a-f-]{36})\] (.*) \(when: ", re.M)
UNKNOWN = "00000000-0000-4000-8000-000000000000"


@dataclass(frozen=True)
class Seen:
    """What one consolidation prompt showed the model."""

    facts: dict[str, str]  # id → text
    observations: list[dict[str, Any]]


Plan = Callable[[Seen], dict[str, Any] | Spec]


class Consolidator:
    """Answers consolidation prompts with the next plan; anything else is an error."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._plans: deque[Plan] = deque()
        self.seen: list[Seen] = []

    def push(self, plan: Plan) -> None:
        with self._lock:
            self._plans.append(plan)

    def __call__(self, body: dict[str, Any]) -> Spec:
        system, user = (m["content"] for m in body["messages"][:2])
        if not system.startswith("You maintain the observations"):
            return HTTPError(400, "only consolidation is scripted here")
        seen = Seen(
            facts=dict(FACT_LINE.findall(user)),
            observations=json.loads(user.split("EXISTING OBSERVATIONS:\n", 1)[1]),
        )
        with self._lock:
            self.seen.append(seen)
            plan = self._plans.popleft()
        answer = plan(seen)
        return Reply(answer) if isinstance(answer, dict) else answer


@pytest.fixture(scope="module")
def model() -> Consolidator:
    return Consolidator()


@pytest.fixture(scope="module")
def fake(model: Consolidator) -> Iterator[FakeOpenAI]:
    with FakeOpenAI(responder=model) as server:
        yield server


@pytest.fixture
def llm_settings(fake: FakeOpenAI) -> LLMSettings:
    return LLMSettings(api_key="test-key", base_url=fake.base_url, model="fake", timeout_s=10)


def nothing() -> dict[str, Any]:
    return {"creates": [], "updates": [], "deletes": []}


def source(fact_id: str, quote: str) -> dict[str, str]:
    return {"fact_id": fact_id, "quote": quote}


async def said(api: httpx.AsyncClient, bank: str, text: str, day: str) -> str:
    [fact] = await retain(
        api,
        bank,
        [{"content": f"Alice: {text}", "timestamp": f"{day}T10:00:00Z", "document_id": day}],
    )
    await wait_consolidated(api, bank)
    return fact


async def latest_result(api: httpx.AsyncClient, bank: str) -> dict[str, Any]:
    status = (await api.get(f"{BASE}/{bank}/consolidation")).json()
    operation = (await api.get(f"{BASE}/{bank}/operations/{status['operation_id']}")).json()
    assert operation["status"] == "completed", operation
    result: dict[str, Any] = operation["result_metadata"]
    return result


async def test_the_model_creates_and_updates_and_its_inventions_are_rejected(
    api: httpx.AsyncClient, bank_id: str, model: Consolidator
) -> None:
    await configure(api, bank_id, extraction_mode="local")

    def create(seen: Seen) -> dict[str, Any]:
        [(fact_id, text)] = seen.facts.items()
        assert text == "Alice struggles with async Python." and seen.observations == []
        return nothing() | {
            "creates": [
                {
                    "text": "Alice struggles with async Python.",
                    "sources": [source(fact_id, "struggles with async Python")],
                },
                {"text": "Alice is a Rust expert.", "sources": [source(UNKNOWN, "Rust")]},
            ]
        }

    model.push(create)
    first = await said(api, bank_id, "I struggle with async Python.", "2024-01-02")
    [created] = await observations(api, bank_id)
    assert created["text"] == "Alice struggles with async Python."
    assert created["source_memory_ids"] == [first]
    assert (await latest_result(api, bank_id)) | {"batches": 0} == {
        "facts": 1,
        "created": 1,
        "reinforced": 0,
        "updated": 0,
        "merged": 0,
        "retracted": 0,
        "rejected": 1,
        "batches": 0,
    }

    def update(seen: Seen) -> dict[str, Any]:
        [(fact_id, _)] = seen.facts.items()
        [shown] = seen.observations
        assert shown["id"] == created["id"] and shown["evidence"] == [created["text"]]
        return nothing() | {
            "updates": [
                {
                    "observation_id": shown["id"],
                    "text": "Alice used to struggle with async Python; now she writes async "
                    "database calls.",
                    "reason": "she wrote async database calls",
                    "contradiction": True,
                    "sources": [source(fact_id, "wrote async database calls")],
                }
            ]
        }

    model.push(update)
    second = await said(api, bank_id, "I wrote async database calls today.", "2024-01-16")
    [updated] = await observations(api, bank_id)
    assert updated["id"] == created["id"]
    assert updated["text"].startswith("Alice used to struggle with async Python; now")
    detail = await memory(api, bank_id, updated["id"])
    [previous] = detail["history"]
    assert previous["previous_text"] == created["text"] and previous["fact_ids"] == [second]
    assert "she wrote async database calls" in previous["reason"]
    assert {e["memory_id"]: e["stance"] for e in detail["evidence"]} == {
        first: "superseded",
        second: "supports",
    }
    assert detail["origin"] == "llm"


async def test_bad_citations_are_rejected_and_a_duplicate_create_is_merged(
    api: httpx.AsyncClient, bank_id: str, model: Consolidator
) -> None:
    await configure(api, bank_id, extraction_mode="local")
    model.push(
        lambda seen: (
            nothing()
            | {
                "creates": [
                    {"text": "Alice prefers tea.", "sources": [source(fid, "prefers tea")]}
                    for fid in seen.facts
                ]
            }
        )
    )
    await said(api, bank_id, "I prefer tea.", "2024-02-01")
    [tea] = await observations(api, bank_id)

    def mixed(seen: Seen) -> dict[str, Any]:
        [(fact_id, _)] = seen.facts.items()
        return {
            "creates": [
                {"text": "Alice likes green tea.", "sources": [source(fact_id, "not in the fact")]},
                {"text": "Alice prefers to drink tea.", "sources": [source(fact_id, "tea")]},
            ],
            "updates": [
                {
                    "observation_id": UNKNOWN,
                    "text": "Alice prefers coffee.",
                    "reason": "made up",
                    "contradiction": True,
                    "sources": [source(fact_id, "tea")],
                }
            ],
            "deletes": [],
        }

    model.push(mixed)
    second = await said(api, bank_id, "I prefer tea after lunch.", "2024-02-08")
    [merged] = await observations(api, bank_id)  # the duplicate create folded into `tea`
    assert merged["id"] == tea["id"] and merged["text"] == "Alice prefers tea."
    assert merged["proof_count"] == 2 and second in merged["source_memory_ids"]
    result = await latest_result(api, bank_id)
    assert (result["created"], result["merged"], result["rejected"]) == (1, 1, 2)
    [history] = (await memory(api, bank_id, tea["id"]))["history"]
    assert history["change"] == "merged" and "Alice prefers to drink tea." in history["reason"]


async def test_a_delete_citing_facts_retracts_the_observation(
    api: httpx.AsyncClient, bank_id: str, model: Consolidator
) -> None:
    await configure(api, bank_id, extraction_mode="local")
    model.push(
        lambda seen: (
            nothing()
            | {
                "creates": [
                    {"text": "Alice lives in Rome.", "sources": [source(fid, "lives in Rome")]}
                    for fid in seen.facts
                ]
            }
        )
    )
    await said(api, bank_id, "I live in Rome.", "2024-03-01")
    [rome] = await observations(api, bank_id)
    model.push(
        lambda seen: (
            nothing()
            | {
                "deletes": [
                    {
                        "observation_id": rome["id"],
                        "reason": "she never lived there",
                        "sources": [source(fid, "never lived in Rome") for fid in seen.facts],
                    }
                ]
            }
        )
    )
    await said(api, bank_id, "Actually, I never lived in Rome.", "2024-03-02")
    assert await observations(api, bank_id) == []
    history = (await api.get(f"{BASE}/{bank_id}/memories/{rome['id']}/history")).json()
    assert history[0]["change"] == "retracted" and "never lived there" in history[0]["reason"]


async def test_a_model_that_keeps_answering_garbage_does_not_block_the_backlog(
    api: httpx.AsyncClient, bank_id: str, model: Consolidator
) -> None:
    await configure(api, bank_id, extraction_mode="local")
    for _ in range(2):  # the third attempt gives up on the model
        model.push(lambda seen: Reply("I think Alice likes tea, but here is no JSON"))
    await retain(
        api,
        bank_id,
        [
            {"content": "Alice: I prefer tea.", "timestamp": "2024-05-01T10:00:00Z"},
            {"content": "Alice: I prefer tea after lunch.", "timestamp": "2024-05-02T10:00:00Z"},
        ],
    )
    await wait_consolidated(api, bank_id)
    [observation] = await observations(api, bank_id)
    assert observation["text"] == "Alice prefers tea." and observation["proof_count"] == 2
    assert (await memory(api, bank_id, observation["id"]))["origin"] == "local"


async def test_a_model_unavailable_once_is_retried(
    api: httpx.AsyncClient, bank_id: str, model: Consolidator
) -> None:
    await configure(api, bank_id, extraction_mode="local")
    asked = len(model.seen)

    def create(seen: Seen) -> dict[str, Any]:
        [(fact_id, _)] = seen.facts.items()
        return nothing() | {
            "creates": [
                {"text": "Alice keeps bees.", "sources": [source(fact_id, "keeps bees")]},
            ]
        }

    model.push(lambda seen: HTTPError(503, "overloaded"))
    model.push(create)
    fact = await said(api, bank_id, "I keep bees in the garden.", "2024-06-01")
    [observation] = await observations(api, bank_id)
    assert observation["text"] == "Alice keeps bees."
    assert observation["source_memory_ids"] == [fact]
    assert (await memory(api, bank_id, observation["id"]))["origin"] == "llm"
    assert len(model.seen) - asked == 2  # the 503, then the retry


async def test_a_model_that_stays_unavailable_falls_back_to_the_local_path(
    api: httpx.AsyncClient, bank_id: str, model: Consolidator
) -> None:
    await configure(api, bank_id, extraction_mode="local")
    asked = len(model.seen)
    for _ in range(2):  # every attempt that asks the model; the third goes local
        model.push(lambda seen: HTTPError(503, "overloaded"))
    await retain(
        api,
        bank_id,
        [
            {"content": "Alice: I prefer coffee.", "timestamp": "2024-07-01T10:00:00Z"},
            {"content": "Alice: I prefer coffee at dawn.", "timestamp": "2024-07-02T10:00:00Z"},
        ],
    )
    await wait_consolidated(api, bank_id)
    [observation] = await observations(api, bank_id)
    assert observation["proof_count"] == 2  # no fact was dropped
    assert (await memory(api, bank_id, observation["id"]))["origin"] == "local"
    assert len(model.seen) - asked == 2
    result = await latest_result(api, bank_id)
    assert result["facts"] == 2 and result["created"] == 1
