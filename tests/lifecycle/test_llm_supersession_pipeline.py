"""The `llm` path of supersession in the retain pipeline (DocumentBatchWorkflow's step after the
upsert), driven by the scripted OpenAI-compatible server: the model's answer supersedes a fact
the local rules miss; when the model fails, the retain still completes with the local rules'
decision."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from support.fake_openai import FakeOpenAI, HTTPError, Reply, Spec

from engine.db import Pool
from engine.settings import LLMSettings

BASE = "/v1/default/banks"
LABEL = re.compile(r"^(F\d+): (.*)$", re.M)


class Model:
    """Extraction: the item's text is the one fact (about Sam). Supersession: the label of the
    stored fact naming `replaced`, or a refusal while `failing`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.replaced = "Acme"
        self.failing = False
        self.asked: list[str] = []

    def __call__(self, body: dict[str, Any]) -> Spec:
        system, user = (m["content"] for m in body["messages"][:2])
        if system.startswith("You maintain a long-term memory. A new fact"):
            with self._lock:
                self.asked.append(user)
                if self.failing:
                    return HTTPError(400, "refused", "invalid_request_error")
            chosen = [
                {"label": label, "reason": "a new employer"}
                for label, text in LABEL.findall(user)
                if self.replaced in text
            ]
            return Reply({"superseded": chosen})
        sentence = next(s for s in SENTENCES if s in user)
        fact = {
            "text": sentence,
            "fact_type": "world",
            "who": ["Sam"],
            "what": sentence,
            "where": None,
            "when": None,
            "why": None,
            "occurred_start": None,
            "occurred_end": None,
            "entities": [{"name": "Sam", "kind": "person"}],
            "causes": [],
            "importance": 7,
        }
        return Reply({"facts": [fact]})


SENTENCES = (
    "Sam works at Acme.",
    "Sam has been with Globex since March.",
    "Sam lives in Paris.",
    "Sam moved to Rome.",
)


@pytest.fixture(scope="module")
def model() -> Model:
    return Model()


@pytest.fixture(scope="module")
def fake(model: Model) -> Iterator[FakeOpenAI]:
    with FakeOpenAI(responder=model) as server:
        yield server


@pytest.fixture
def llm_settings(fake: FakeOpenAI) -> LLMSettings:
    return LLMSettings(api_key="test-key", base_url=fake.base_url, model="fake", timeout_s=10)


async def said(api: httpx.AsyncClient, bank: str, text: str, day: str) -> None:
    item = {"content": text, "timestamp": f"{day}T10:00:00Z", "document_id": day}
    response = await api.post(f"{BASE}/{bank}/memories", json={"items": [item]})
    assert response.status_code == 200, response.text


async def states(pool: Pool, bank: str) -> dict[str, tuple[str, str | None]]:
    async with pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT m.text, m.state, s.text AS successor FROM memory_units m"
            " LEFT JOIN memory_units s ON s.id = m.superseded_by WHERE m.bank_id = $1",
            bank,
        )
    return {r["text"]: (r["state"], r["successor"]) for r in rows}


async def test_retain_asks_the_model_which_facts_a_new_one_supersedes(
    api: httpx.AsyncClient, pool: Pool, bank_id: str, model: Model
) -> None:
    put = await api.put(
        f"{BASE}/{bank_id}", json={"extraction_mode": "llm", "enable_observations": False}
    )
    assert put.status_code == 200, put.text
    await said(api, bank_id, "Sam works at Acme.", "2025-01-10")
    await said(api, bank_id, "Sam has been with Globex since March.", "2025-03-20")
    # "has been with" is no employer cue of the local rules: the model decided this one.
    assert (await states(pool, bank_id))["Sam works at Acme."] == (
        "superseded",
        "Sam has been with Globex since March.",
    )
    assert any("F1: Sam works at Acme." in prompt for prompt in model.asked)
    async with pool.acquire() as conn:
        reason = await conn.fetchval(
            "SELECT v.reason FROM memory_versions v JOIN memory_units m ON m.id = v.memory_id"
            " WHERE m.bank_id = $1 AND m.text = 'Sam works at Acme.' AND v.change = 'superseded'",
            bank_id,
        )
    assert reason == "llm: a new employer"


async def test_a_failing_model_leaves_the_local_rules_decision(
    api: httpx.AsyncClient, pool: Pool, bank_id: str, model: Model
) -> None:
    put = await api.put(
        f"{BASE}/{bank_id}", json={"extraction_mode": "llm", "enable_observations": False}
    )
    assert put.status_code == 200, put.text
    model.failing = True
    try:
        await said(api, bank_id, "Sam lives in Paris.", "2025-01-10")
        await said(api, bank_id, "Sam works at Acme.", "2025-01-11")
        asked = len(model.asked)
        await said(api, bank_id, "Sam moved to Rome.", "2025-03-20")
        # asked about the still active Acme fact (Paris was superseded in the upsert), refused
        assert any("F1: Sam works at Acme." in p for p in model.asked[asked:])
    finally:
        model.failing = False
    facts = await states(pool, bank_id)
    assert facts["Sam moved to Rome."] == ("active", None)
    assert facts["Sam works at Acme."] == ("active", None)
    assert facts["Sam lives in Paris."] == ("superseded", "Sam moved to Rome.")
