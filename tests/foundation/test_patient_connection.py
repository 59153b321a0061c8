"""`engine.db.patient`: a connection for a step whose statements grow with its input (the
retain upsert) waits past the pool's command timeout, and is otherwise the connection."""

from __future__ import annotations

import asyncpg
import pytest

from engine.db import patient


async def test_a_patient_connection_outwaits_the_command_timeout(database_url: str) -> None:
    conn = await asyncpg.connect(database_url, command_timeout=0.2)
    try:
        with pytest.raises(TimeoutError):
            await conn.fetchval("SELECT pg_sleep(0.5)")
        waiting = patient(conn, 5)
        assert await waiting.fetchval("SELECT 4 FROM pg_sleep(0.5)") == 4
        assert (await waiting.fetch("SELECT 1 AS one FROM pg_sleep(0.5)"))[0]["one"] == 1
        row = await waiting.fetchrow("SELECT 2 AS two FROM pg_sleep(0.5)")
        assert row is not None and row["two"] == 2
        await waiting.execute("SELECT pg_sleep(0.5)")
        await waiting.executemany("SELECT pg_sleep($1)", [(0.5,)])
        with pytest.raises(TimeoutError):  # a call that names its own timeout keeps it
            await waiting.fetchval("SELECT pg_sleep(0.5)", timeout=0.2)
        async with waiting.transaction():  # everything else is the connection's
            assert await waiting.fetchval("SELECT 3") == 3
    finally:
        await conn.close()
