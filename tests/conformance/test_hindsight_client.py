"""The official hindsight-client (an external implementation of the wire format) works
against Engram unchanged for banks, retain, operations, documents, memories and entities."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from hindsight_client import Hindsight
from hindsight_client_api.exceptions import NotFoundException
from starlette.applications import Starlette
from support.serve import serve
from support.waiting import until
from temporalio.worker import Worker


@pytest.fixture
async def client(app: Starlette, worker: Worker) -> AsyncIterator[Hindsight]:
    async with serve(app) as url:
        hindsight = Hindsight(base_url=url, user_agent="engram-tests/1")
        try:
            yield hindsight
        finally:
            await hindsight.aclose()  # type: ignore[no-untyped-call]


async def test_bank_retain_list_get_round_trip(client: Hindsight, bank_id: str) -> None:
    profile = await client.acreate_bank(
        bank_id,
        name="Support chat",
        mission="Remember what users tell us",
        disposition_skepticism=4,
        retain_chunk_size=1200,
    )
    assert profile.bank_id == bank_id
    assert profile.name == "Support chat"
    assert profile.disposition.skepticism == 4

    retained = await client.aretain(
        bank_id,
        "Caroline: I went to a support group yesterday.",
        timestamp="2023-05-08T13:56:00Z",
        context="chat",
        document_id="chat-1",
        metadata={"dia_id": "D1:3"},
        tags=["support"],
    )
    assert retained.success and retained.items_count == 1 and retained.var_async is False

    listed = await client.alist_memories(bank_id, document_id="chat-1")
    assert listed.total >= 1
    fact = next(m for m in listed.items if "support group" in (m.text or ""))
    assert fact.occurred_start is not None and fact.occurred_start.startswith("2023-05-07")
    assert "Caroline" in (fact.entities or "")
    assert fact.tags == ["support"]

    memory = await client.memory.get_memory(bank_id, fact.id)
    assert isinstance(memory, dict) and memory["text"] == fact.text

    entities = await client.entities.list_entities(bank_id)
    caroline = next(e for e in entities.items if e.canonical_name == "Caroline")
    detail = await client.entities.get_entity(bank_id, caroline.id)
    assert detail.mention_count >= 1 and detail.observations == []

    documents = await client.documents.list_documents(bank_id)
    assert [d.id for d in documents.items] == ["chat-1"]
    document = await client.documents.get_document(bank_id, "chat-1")
    assert document.memory_unit_count >= 1
    chunks = await client.documents.list_document_chunks(bank_id, "chat-1")
    assert chunks.total == 1 and "support group" in chunks.items[0].chunk_text

    banks = await client.banks.list_banks()
    assert bank_id in [b.bank_id for b in banks.banks]


async def test_async_retain_and_operations(client: Hindsight, bank_id: str) -> None:
    op = f"op-{bank_id}"
    submitted = await client.aretain(
        bank_id, "Jun adopted a beagle named Pixel.", retain_async=True, operation_id=op
    )
    assert submitted.var_async is True and submitted.operation_id == op
    status = await until(
        lambda: client.operations.get_operation_status(bank_id, op),
        lambda status: status.status in ("completed", "failed"),
        f"operation {op} finished",
    )
    assert status.status == "completed"
    operations = await client.operations.list_operations(bank_id)
    retains = [o.id for o in operations.operations if o.task_type == "retain"]
    assert retains == [op]  # consolidation may have recorded an operation of its own


async def test_delete_document_and_bank(client: Hindsight, bank_id: str) -> None:
    await client.aretain_batch(
        bank_id,
        [{"content": "Olga runs a bakery in Riga."}, {"content": "Olga sells rye bread."}],
        document_id="olga",
    )
    deleted = await client.documents.delete_document(bank_id, "olga")
    assert deleted.success and deleted.memory_units_deleted >= 2
    assert (await client.alist_memories(bank_id)).total == 0
    await client.adelete_bank(bank_id)
    assert bank_id not in [b.bank_id for b in (await client.banks.list_banks()).banks]
    with pytest.raises(NotFoundException):
        await client.documents.list_documents(bank_id)
