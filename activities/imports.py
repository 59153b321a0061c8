"""Import activities: load staged documents by reference and hand them to retain's steps."""

from __future__ import annotations

from temporalio import activity

from engine.db import Pool
from engine.imports.payloads import (
    ImportDocumentJob,
    ImportFinish,
    ImportPage,
    ImportUpsert,
    StagedDocumentRef,
)
from engine.imports.staging import clear_staged, list_staged, load_staged
from engine.retain.payloads import DocumentInput, RetainPlan, UpsertDocument, UpsertResult
from engine.retain.plan import plan_documents
from engine.retain.upsert import upsert_document

# After a large import the planner's statistics still describe the database before it:
# autovacuum analyses a table only once a tenth of it has changed, so a new bank's thousands
# of facts in a large database stay invisible to the planner, and recall may choose plans made
# for a tiny bank (an exact scan sorted by distance instead of the HNSW index; the link step
# had the same problem, engine/retain/links.py). Sampled, so ~0.1-1 s even at 1M facts.
ANALYZE_AFTER_FACTS = 1_000
_ANALYZE = "ANALYZE memory_units, memory_terms, unit_entities, memory_links"


class ImportActivities:
    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    @activity.defn
    async def list_import_documents(self, page: ImportPage) -> list[StagedDocumentRef]:
        async with self._pool.acquire() as conn:
            return await list_staged(conn, page)

    @activity.defn
    async def plan_import_document(self, job: ImportDocumentJob) -> RetainPlan:
        async with self._pool.acquire() as conn:
            document_id, items = await load_staged(conn, job.operation_id, job.seq)
            document = DocumentInput(document_id, items, "replace", explicit_id=True)
            return await plan_documents(
                conn, job.bank_id, job.operation_id, [document], job.options.chunk_size
            )

    @activity.defn
    async def upsert_import_document(self, job: ImportUpsert) -> UpsertResult:
        async with self._pool.acquire() as conn:
            _, items = await load_staged(conn, job.operation_id, job.seq)
            return await upsert_document(
                conn, UpsertDocument(job.bank_id, job.operation_id, job.plan, items, "replace")
            )

    @activity.defn
    async def finish_import(self, finish: ImportFinish) -> None:
        async with self._pool.acquire() as conn:
            await clear_staged(conn, finish.operation_id)
            if finish.facts_changed >= ANALYZE_AFTER_FACTS:
                await conn.execute(_ANALYZE)
