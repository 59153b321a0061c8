"""Import activities: what an import does besides the shared document pipeline."""

from __future__ import annotations

from temporalio import activity

from engine.db import Pool
from engine.imports.payloads import ImportFinish
from engine.imports.staging import clear_staged

# After a large import the planner's statistics still describe the database before it:
# autovacuum analyses a table only once a tenth of it has changed, so a new bank's thousands
# of facts in a large database stay invisible to the planner, and recall may choose plans made
# for a tiny bank (an exact scan sorted by distance instead of the HNSW index; the link step
# had the same problem, engine/retain/links.py). Sampled, so ~0.1-1 s even at 1M facts.
ANALYZE_AFTER_FACTS = 1_000
_ANALYZE = "ANALYZE memory_units, unit_times, memory_terms, unit_entities, memory_links"


class ImportActivities:
    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    @activity.defn
    async def finish_import(self, finish: ImportFinish) -> None:
        async with self._pool.acquire() as conn:
            if not finish.keep_input:
                await clear_staged(conn, finish.operation_id)
            if finish.facts_changed >= ANALYZE_AFTER_FACTS:
                await conn.execute(_ANALYZE)
