"""Supersession, llm path, against the scripted OpenAI-compatible server: the model's answer
is applied only for facts it was shown; labels it invents are ignored."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime

from pgvector import Vector
from support.fake_openai import FakeOpenAI, Reply

from engine.db import Pool
from engine.embedding import Embedder
from engine.lifecycle.llm_detect import apply_llm_supersession
from engine.llm import LLMClient
from engine.settings import LLMSettings
from engine.store.banks import ensure_bank


async def insert_fact(pool: Pool, bank: str, text: str, day: datetime, dim: int) -> str:
    fact_id = str(uuid.uuid4())
    async with pool.acquire() as conn:
        await conn.execute(
            "INSERT INTO memory_units (id, bank_id, fact_type, text, embedding, mentioned_at,"
            " valid_from) VALUES ($1, $2, 'world', $3, $4, $5, $5)",
            fact_id,
            bank,
            text,
            Vector([1.0] + [0.0] * (dim - 1)),
            day,
        )
    return fact_id


async def test_llm_supersession_is_validated_against_the_facts_shown(
    pool: Pool, embedder: Embedder, bank_id: str
) -> None:
    async with pool.acquire() as conn:
        await ensure_bank(conn, bank_id)
    dim = embedder.dimension
    acme = await insert_fact(
        pool, bank_id, "Sam works at Acme.", datetime(2025, 1, 2, tzinfo=UTC), dim
    )
    tea = await insert_fact(pool, bank_id, "Sam likes tea.", datetime(2025, 1, 1, tzinfo=UTC), dim)
    new = await insert_fact(
        pool,
        bank_id,
        "Sam has been with Globex since March.",
        datetime(2025, 3, 5, tzinfo=UTC),
        dim,
    )
    answer = {
        "superseded": [
            {"label": "F1", "reason": "a new employer"},
            {"label": "F9", "reason": "not shown"},
            {"label": "F1", "reason": "twice"},
        ]
    }
    with FakeOpenAI([Reply(answer)]) as fake:
        settings = LLMSettings(api_key="test-key", base_url=fake.base_url, timeout_s=10.0)
        async with LLMClient(settings) as llm, pool.acquire() as conn:
            applied = await apply_llm_supersession(conn, llm, bank_id, [new])
        [request] = fake.requests
    prompt = json.dumps(request)
    assert "F1: Sam works at Acme." in prompt and "F2: Sam likes tea." in prompt
    assert [(s.old_id, s.new_id) for s in applied] == [(acme, new)]
    async with pool.acquire() as conn:
        rows = {
            str(r["id"]): r
            for r in await conn.fetch(
                "SELECT id, state, superseded_by::text AS successor, valid_to FROM memory_units"
                " WHERE bank_id = $1",
                bank_id,
            )
        }
    assert rows[acme]["state"] == "superseded" and rows[acme]["successor"] == new
    assert rows[acme]["valid_to"] == datetime(2025, 3, 5, tzinfo=UTC)
    assert rows[tea]["state"] == "active" and rows[new]["state"] == "active"
