"""The bulk loader's index handling (bench/bulk_load.py): the link, term and mention tables'
primary keys, secondary indexes and foreign keys, and the HNSW index, are dropped before a
load and rebuilt after it. Their definitions are kept in the data directory until they are
back, so a load stopped half-way resumes and restores them."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Final

from engine.db import Connection

_TABLES: Final = ("memory_links", "memory_terms", "unit_entities")

_DROPPABLE = """
SELECT 'constraint' AS what, c.conrelid::regclass::text AS tbl, c.conname AS name,
       c.contype::text AS kind, pg_get_constraintdef(c.oid) AS definition
FROM pg_constraint c
WHERE c.conrelid::regclass::text = ANY($1::text[]) AND c.contype IN ('p', 'f')
UNION ALL
SELECT 'index', i.indrelid::regclass::text, x.relname, 'i', pg_get_indexdef(i.indexrelid)
FROM pg_index i JOIN pg_class x ON x.oid = i.indexrelid
WHERE (i.indrelid::regclass::text = ANY($1::text[]) OR x.relname = 'memory_units_embedding')
  AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid)
"""


async def _present(conn: Connection) -> set[str]:
    rows = await conn.fetch(
        "SELECT conname AS name FROM pg_constraint UNION SELECT relname FROM pg_class"
    )
    return {r["name"] for r in rows}


async def drop_indexes(conn: Connection, saved: Path) -> None:
    """Drop the link, term and mention tables' keys and indexes and the HNSW index, keeping
    their definitions in `saved` (if it exists, a run stopped before rebuilding them all:
    what it rebuilt is dropped again)."""
    if await asyncio.to_thread(saved.exists):  # a run stopped while rebuilding them
        found = json.loads(await asyncio.to_thread(saved.read_text))
        present = await _present(conn)
        found = [item for item in found if item["name"] in present]
    else:
        found = [dict(r) for r in await conn.fetch(_DROPPABLE, list(_TABLES))]
        await asyncio.to_thread(saved.write_text, json.dumps(found, indent=1))
    for item in sorted(found, key=lambda r: r["kind"] != "f"):  # foreign keys first
        if item["what"] == "constraint":
            await conn.execute(f'ALTER TABLE {item["tbl"]} DROP CONSTRAINT "{item["name"]}"')
        else:
            await conn.execute(f'DROP INDEX "{item["name"]}"')


async def restore_indexes(conn: Connection, saved: Path, memory: str) -> dict[str, float]:
    """Rebuild what drop_indexes dropped (keys, then indexes, then foreign keys); seconds each.
    `conn` must have no statement timeout (the loader's connection): the HNSW build takes
    minutes."""
    if not await asyncio.to_thread(saved.exists):
        return {}
    found = json.loads(await asyncio.to_thread(saved.read_text))
    await conn.execute(f"SET maintenance_work_mem = '{memory}'")
    await conn.execute("SET max_parallel_maintenance_workers = 2")
    seconds: dict[str, float] = {}
    order = {"p": 0, "i": 1, "f": 2}
    present = await _present(conn)
    for item in sorted(found, key=lambda r: order[r["kind"]]):
        if item["name"] in present:  # rebuilt by a run that stopped before the rest
            continue
        started = time.perf_counter()
        if item["what"] == "constraint":
            await conn.execute(
                f'ALTER TABLE {item["tbl"]} ADD CONSTRAINT "{item["name"]}" {item["definition"]}'
            )
        else:
            await conn.execute(item["definition"])
        seconds[item["name"]] = round(time.perf_counter() - started, 1)
        print(f"  rebuilt {item['name']} in {seconds[item['name']]:.0f}s", flush=True)
    await asyncio.to_thread(saved.unlink)
    return seconds
