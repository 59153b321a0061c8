"""A database as an older release left it: every migration before a given one applied, with
the runner's bookkeeping, so `engine.db.migrate` then applies the rest as on an upgrade."""

from __future__ import annotations

import asyncpg

from engine.db import load_migrations


async def migrate_before(dsn: str, dimension: int, version: int) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(
            "CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        for migration in load_migrations():
            if migration.version < version:
                await conn.execute(migration.sql.replace("{embedding_dim}", str(dimension)))
                await conn.execute(
                    "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)",
                    migration.version,
                    migration.name,
                )
    finally:
        await conn.close()
