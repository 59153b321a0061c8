"""hindsight-client 1.1's maintenance calls work against Engram unchanged: dry-run
extraction, a mental model's dry-run refresh, one audit entry, clearing a memory's
observations, retrying an operation, document history and reprocessing, and regenerating an
entity."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
from hindsight_client import Hindsight
from hindsight_client_api.exceptions import ApiException, BadRequestException
from hindsight_client_api.models.content import Content
from hindsight_client_api.models.dry_run_extract_request import DryRunExtractRequest
from starlette.applications import Starlette
from support.serve import serve
from temporalio.worker import Worker


@pytest.fixture
async def client(app: Starlette, worker: Worker) -> AsyncIterator[Hindsight]:
    async with serve(app) as url:
        hindsight = Hindsight(base_url=url, user_agent="engram-tests/1")
        try:
            yield hindsight
        finally:
            await hindsight.aclose()  # type: ignore[no-untyped-call]


async def test_maintenance_calls_round_trip(client: Hindsight, bank_id: str) -> None:
    await client.acreate_bank(bank_id, name="Maintenance")
    preview = await client.memory.dry_run_extract_memories(
        bank_id,
        DryRunExtractRequest(
            content=Content("Ines moved to Lisbon in March 2024. She adopted a cat named Miso."),
            timestamp=datetime(2024, 5, 1, 10, tzinfo=UTC),
            retain_extraction_mode="local",
        ),
    )
    assert preview.facts is not None and len(preview.facts) == 2
    assert "Lisbon" in preview.facts[0].text and "Ines" in (preview.facts[0].entities or [])
    assert preview.usage is not None and preview.usage.total_tokens == 0
    assert (await client.memory.list_memories(bank_id)).total == 0  # nothing stored
    with pytest.raises(BadRequestException) as refused:
        await client.memory.dry_run_extract_memories(
            bank_id, DryRunExtractRequest(content=Content("x"), llm_output_language="pt")
        )
    assert "llm_output_language" in str(refused.value.body)

    retained = await client.aretain(
        bank_id, "Ines moved to Lisbon in March 2024.", document_id="move"
    )
    assert retained.success
    memories = await client.memory.list_memories(bank_id)
    fact_id = memories.items[0].id
    cleared = await client.memory.clear_memory_observations(bank_id, fact_id)
    assert cleared.deleted_count >= 0

    history = await client.documents.get_document_history(bank_id, "move")
    assert history.total == 1 and history.items[0].kind == "retain"
    reprocessed = await client.documents.reprocess_document(bank_id, "move")
    assert reprocessed.success and reprocessed.items_count == 1
    entities = await client.entities.list_entities(bank_id)
    ines = next(e for e in entities.items if e.canonical_name == "Ines")
    with pytest.warns(DeprecationWarning):  # deprecated by Hindsight; still served
        regenerated = await client.entities.regenerate_entity_observations(bank_id, ines.id)
    assert regenerated.canonical_name == "Ines" and regenerated.mention_count >= 1

    await client.acreate_mental_model(bank_id, name="Home", source_query="Where does Ines live?")
    models = await client.alist_mental_models(bank_id)
    model_id = models.items[0].id
    refresh = await client.mental_models.dry_run_refresh_mental_model(bank_id, model_id)
    assert refresh.effective_mode == "full" and refresh.candidate_content
    assert refresh.would_persist == (refresh.outcome == "content_written")

    audit = await client.audit.list_audit_logs(bank_id)
    entry = await client.audit.get_audit_log(bank_id, audit.items[0].id)
    assert entry.id == audit.items[0].id and entry.transport == "http"

    operations = await client.operations.list_operations(bank_id)
    with pytest.raises(ApiException) as done:
        await client.operations.retry_operation(bank_id, operations.operations[-1].id)
    assert done.value.status == 409
