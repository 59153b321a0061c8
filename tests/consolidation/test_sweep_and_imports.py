"""The sweep leaves a bank alone while an import fills it (the import asks for its own
consolidation when it ends), but not forever."""

from __future__ import annotations

import uuid

import httpx
from consolidation_support import configure, retain, status

from engine.consolidation.observations import IMPORT_QUIET_HOURS, banks_with_work
from engine.db import Pool


async def open_import(pool: Pool, bank: str, status: str, hours_ago: float = 0) -> None:
    async with pool.acquire() as conn:
        await conn.execute(
            "INSERT INTO operations (operation_id, bank_id, kind, workflow_id, request_hash,"
            " status, created_at)"
            " VALUES ($1, $2, 'import', $1, '', $3, now() - make_interval(secs => $4))",
            f"import-{uuid.uuid4()}",
            bank,
            status,
            hours_ago * 3600,
        )


async def swept(pool: Pool, bank: str) -> bool:
    async with pool.acquire() as conn:
        return bank in await banks_with_work(conn, 10_000)


async def test_the_sweep_skips_a_bank_while_an_import_runs(
    api: httpx.AsyncClient, pool: Pool, bank_id: str
) -> None:
    await configure(api, bank_id, enable_observations=False)
    await retain(api, bank_id, [{"content": "Rita: I love sailing.", "timestamp": "2024-04-01"}])
    await configure(api, bank_id, enable_observations=True)
    assert (await status(api, bank_id))["pending_facts"] == 1
    assert await swept(pool, bank_id)

    await open_import(pool, bank_id, "completed")
    assert await swept(pool, bank_id)  # a finished import holds nothing back
    await open_import(pool, bank_id, "running", hours_ago=IMPORT_QUIET_HOURS + 1)
    assert await swept(pool, bank_id)  # nor one left open for hours (a terminated workflow)
    await open_import(pool, bank_id, "running")
    assert not await swept(pool, bank_id)
