"""The end of an import: after a large one the planner's statistics are refreshed."""

from __future__ import annotations

from activities.imports import ANALYZE_AFTER_FACTS, ImportActivities
from engine.db import Pool
from engine.imports.payloads import ImportFinish


async def manual_analyses(pool: Pool) -> int:
    async with pool.acquire() as conn:
        count: int = await conn.fetchval(
            "SELECT analyze_count FROM pg_stat_user_tables WHERE relname = 'memory_units'"
        )
        return count


async def test_a_large_import_refreshes_the_planner_statistics(pool: Pool) -> None:
    activities = ImportActivities(pool)
    before = await manual_analyses(pool)
    await activities.finish_import(ImportFinish("import-small", ANALYZE_AFTER_FACTS - 1))
    assert await manual_analyses(pool) == before
    await activities.finish_import(ImportFinish("import-large", ANALYZE_AFTER_FACTS))
    assert await manual_analyses(pool) == before + 1
