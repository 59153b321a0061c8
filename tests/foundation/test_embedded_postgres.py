"""The embedded PostgreSQL takes extra server settings (the import bench's --pg-stats)."""

from __future__ import annotations

from pathlib import Path

import asyncpg

from engram.postgres import EmbeddedPostgres


async def test_extra_server_options_reach_the_server(tmp_path: Path) -> None:
    server = EmbeddedPostgres(
        tmp_path / "data", tmp_path / "postgres.log", ("work_mem=7MB", "jit=off")
    )
    server.start()
    try:
        conn = await asyncpg.connect(server.dsn)
        try:
            assert await conn.fetchval("SHOW work_mem") == "7MB"
            assert await conn.fetchval("SHOW jit") == "off"
            assert await conn.fetchval("SHOW listen_addresses") == ""  # the defaults still apply
        finally:
            await conn.close()
    finally:
        server.stop()
