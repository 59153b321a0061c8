"""The reranker's context follows the conversation, not the document (engine/recall/context.py):
a conversation sent as one document per message gets the neighbours it gets as one document."""

from __future__ import annotations

from engine.db import Pool
from engine.recall.config import RecallConfig
from engine.recall.context import NEIGHBOURS_SQL
from recall.recall_support import Banks


async def neighbours_by_text(pool: Pool, bank: str) -> dict[str, list[str]]:
    """Each fact's text -> its context's texts, nearest first, as recall reads them."""
    config = RecallConfig()
    async with pool.acquire() as conn:
        facts = {
            r["id"]: r["text"]
            for r in await conn.fetch(
                "SELECT id::text, text FROM memory_units WHERE bank_id = $1", bank
            )
        }
        rows = await conn.fetch(
            NEIGHBOURS_SQL,
            bank,
            list(facts),
            config.context_neighbours,
            config.context_chunks,
            config.context_gap,
            config.context_scan,
        )
    found: dict[str, list[str]] = {text: [] for text in facts.values()}
    for r in rows:
        found[facts[r["for_id"]]].append(facts[r["neighbour_id"]])
    return found


async def test_a_conversation_gets_the_same_context_whichever_way_it_was_sent(
    recall_pool: Pool, banks: Banks
) -> None:
    whole = await neighbours_by_text(recall_pool, banks.by_conversation)
    split = await neighbours_by_text(recall_pool, banks.by_message)
    # The context is a union of token sets: which facts, not their order among equals.
    assert {t: sorted(n) for t, n in split.items()} == {t: sorted(n) for t, n in whole.items()}
    answer = next(t for t in split if "Seven years" in t)
    # The turns just before and after the answer come first (one step away each); never the
    # other conversation told at the same moment.
    assert set(split[answer][:2]) == {
        next(t for t in split if "How long" in t),
        next(t for t in split if "anniversary" in t),
    }
    assert not any("Rita" in t or "Omar" in t for t in split[answer])
    assert len(split[next(t for t in split if "Rotterdam" in t)]) == 1
