"""Filling the LoCoMo banks through Engram's HTTP API: one retained item per turn, arriving a
session or a message to a document (bench/locomo_retrieval.py has the protocol), and checking
how many turns the banks' facts trace back to."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from bench.engram_api import EngramAPI, RetainItem
from bench.locomo_data import Conversation, Session

ARRIVALS: Final = ("session", "message")
# The reference client sends a conversation's messages 200 to a request.
MESSAGES_PER_REQUEST: Final = 200
# Banks of the message arrival: bank id = prefix + this + sample_id.
MESSAGE_BANK_INFIX: Final = "msg-"
_DIA_ID_SPLIT: Final = re.compile(r"[,;\s]+")


@dataclass
class IngestStats:
    arrival: str
    mode: str
    concurrency: int
    sessions: int
    turns: int
    seconds: float

    @property
    def turns_per_second(self) -> float:
        return self.turns / self.seconds if self.seconds > 0 else 0.0


@dataclass
class BankCheck:
    bank_id: str
    facts: int
    turns: int
    turns_with_facts: int
    facts_without_dia_id: int
    gold_ids: int
    gold_ids_without_facts: int  # evidence no recall can find: an upper bound on recall


def bank_id_of(prefix: str, conversation: Conversation) -> str:
    return f"{prefix}{conversation.sample_id}"


def session_items(conversation: Conversation, session: Session) -> list[RetainItem]:
    return [
        RetainItem(
            t.content,
            t.timestamp,
            {"dia_id": t.dia_id, "conversation": conversation.sample_id},
        )
        for t in session.turns
    ]


def document_id_of(conversation: Conversation, session: Session) -> str:
    return f"{conversation.sample_id}-session-{session.number}"


def message_items(conversation: Conversation) -> list[RetainItem]:
    """Every turn of the conversation as its own document, in order."""
    return [
        replace(
            item,
            document_id=f"{conversation.sample_id}-s{session.number:02d}-t{index:03d}",
        )
        for session in conversation.sessions
        for index, item in enumerate(session_items(conversation, session), start=1)
    ]


def requests_of(conversation: Conversation, arrival: str) -> list[tuple[str, list[RetainItem]]]:
    """(request document id, items) of each retain request for the conversation: up to 200
    items a request, as the reference client sends them. `session` never splits a session
    (a later request naming the same document would replace it)."""
    if arrival == "message":
        items = message_items(conversation)
        return [
            (f"{conversation.sample_id}-batch-{start}", items[start : start + MESSAGES_PER_REQUEST])
            for start in range(0, len(items), MESSAGES_PER_REQUEST)
        ]
    requests: list[tuple[str, list[RetainItem]]] = []
    for session in conversation.sessions:
        document_id = document_id_of(conversation, session)
        items = [replace(i, document_id=document_id) for i in session_items(conversation, session)]
        if requests and len(requests[-1][1]) + len(items) <= MESSAGES_PER_REQUEST:
            requests[-1][1].extend(items)
        else:
            requests.append((document_id, items))
    return requests


def prefix_of(prefix: str, arrival: str) -> str:
    return prefix if arrival == "session" else prefix + MESSAGE_BANK_INFIX


async def ingest(
    api: EngramAPI,
    conversations: Sequence[Conversation],
    prefix: str,
    *,
    mode: str,
    concurrency: int,
    arrival: str = "session",
) -> IngestStats:
    """Retain every conversation, in order, as `arrival` says (`requests_of`); returns the
    wall time of it all.

    `sync`: requests that wait for their facts, `concurrency` in flight, started in order.
    `async`: queue every request (`concurrency` submissions in flight), then poll the
    operations until all have completed.
    """
    jobs = [(c, *request) for c in conversations for request in requests_of(c, arrival)]
    slots = asyncio.Semaphore(concurrency)

    async def send(
        conversation: Conversation, document_id: str, items: list[RetainItem], wait: bool
    ) -> str:
        async with slots:
            body = await api.retain(bank_id_of(prefix, conversation), document_id, items, wait=wait)
        return str(body["operation_id"])

    started = time.perf_counter()
    if mode == "sync":
        await asyncio.gather(*(send(c, d, items, True) for c, d, items in jobs))
    else:
        operation_ids = await asyncio.gather(*(send(c, d, items, False) for c, d, items in jobs))
        await api.wait_operations(
            [(bank_id_of(prefix, c), op) for (c, _, _), op in zip(jobs, operation_ids, strict=True)]
        )
    seconds = time.perf_counter() - started
    turns = sum(len(items) for _, _, items in jobs)
    return IngestStats(arrival, mode, concurrency, len(jobs), turns, seconds)


def dia_ids_of(result: dict[str, Any]) -> list[str]:
    metadata = result.get("metadata") or {}
    raw = metadata.get("dia_id") if isinstance(metadata, dict) else None
    if not raw:
        return []
    return [part for part in _DIA_ID_SPLIT.split(str(raw)) if part]


async def check_bank(api: EngramAPI, bank_id: str, conversation: Conversation) -> BankCheck:
    """How many facts the bank holds and how many turns they trace back to."""
    memories = await api.list_memories(bank_id)
    covered: set[str] = set()
    missing = 0
    for memory in memories:
        ids = dia_ids_of(memory)
        covered.update(ids)
        missing += not ids
    turns = {t.dia_id for t in conversation.turns}
    gold = {dia_id for q in conversation.questions for dia_id in q.evidence}
    return BankCheck(
        bank_id,
        len(memories),
        len(turns),
        len(covered & turns),
        missing,
        len(gold),
        len(gold - covered),
    )
