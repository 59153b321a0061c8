"""`engram backup` and `engram restore` round-trip a database: every table, and a recall."""

from __future__ import annotations

import asyncio
import dataclasses
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import asyncpg
import httpx
import pytest
from support.operations import consolidated
from temporalio.testing import WorkflowEnvironment

from engine.db import create_pool
from engine.embedding import Embedder
from engine.settings import Settings
from engram import cli
from engram.postgres import EmbeddedPostgres
from server.app import create_app
from server.services import Services

BASE = "/v1/default/banks"
NOTES = [
    "Anna adopted a dog named Rex in March. Rex is a border collie.",
    "Anna works at Globex as a data engineer; her manager is Priya.",
    "The team offsite is in Lisbon next spring. Priya books the hotel.",
]
QUERY = {"query": "Who is Anna's manager and what is her dog called?", "budget": "mid"}

TABLES = "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename"


async def table_digests(dsn: str) -> dict[str, tuple[int, str]]:
    """Row count and an order-independent digest of every table's rows."""
    conn = await asyncpg.connect(dsn)
    try:
        digests: dict[str, tuple[int, str]] = {}
        for row in await conn.fetch(TABLES):
            name = row["tablename"]
            digest = await conn.fetchrow(
                f"SELECT count(*), md5(coalesce(string_agg(t::text, E'\\n' ORDER BY t::text), ''))"
                f' FROM "{name}" t'
            )
            assert digest is not None
            digests[name] = (digest[0], digest[1])
        return digests
    finally:
        await conn.close()


async def settled(api: httpx.AsyncClient, bank: str) -> None:
    """Until the consolidation the retain asked for has run: the backup must see a bank at
    rest, or the comparison would race the worker."""
    await consolidated(api, bank)


async def recall_ids(api: httpx.AsyncClient, bank: str) -> list[str]:
    response = await api.post(f"{BASE}/{bank}/memories/recall", json=QUERY)
    assert response.status_code == 200, response.text
    return [item["id"] for item in response.json()["results"]]


@pytest.fixture
def restored_home(tmp_path: Path) -> Path:
    return tmp_path / "restored"


async def test_backup_then_restore_into_an_empty_home_keeps_every_row_and_recall(
    api: httpx.AsyncClient,
    bank_id: str,
    database_url: str,
    settings: Settings,
    temporal_env: WorkflowEnvironment,
    embedder: Embedder,
    cpu: ThreadPoolExecutor,
    tmp_path: Path,
    restored_home: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    items = [{"content": text, "document_id": f"note-{i}"} for i, text in enumerate(NOTES)]
    response = await api.post(f"{BASE}/{bank_id}/memories", json={"items": items})
    assert response.status_code == 200, response.text
    await settled(api, bank_id)
    before = await recall_ids(api, bank_id)
    assert before
    original = await table_digests(database_url)

    dump_file = tmp_path / "engram.dump"
    monkeypatch.setenv("ENGRAM_DATABASE_URL", database_url)
    assert await asyncio.to_thread(cli.main, ["backup", str(dump_file)]) == 0
    assert "backed up to" in capsys.readouterr().out

    monkeypatch.delenv("ENGRAM_DATABASE_URL")
    monkeypatch.setenv("ENGRAM_HOME", str(restored_home))
    assert await asyncio.to_thread(cli.main, ["restore", str(dump_file)]) == 0
    assert "restored" in capsys.readouterr().out
    # A second restore into the now-filled home refuses instead of mixing two histories.
    assert await asyncio.to_thread(cli.main, ["restore", str(dump_file)]) == 1
    assert "already holds Engram's tables" in capsys.readouterr().err

    cluster = EmbeddedPostgres(restored_home / "postgres", restored_home / "logs" / "pg.log")
    cluster.start()
    try:
        restored = await table_digests(cluster.dsn)
        assert sum(count for count, _ in original.values()) > 0
        assert restored == original
        after = await recall_against(cluster.dsn, settings, temporal_env, embedder, cpu, bank_id)
        assert after == before
    finally:
        cluster.stop()


async def recall_against(
    dsn: str,
    settings: Settings,
    temporal_env: WorkflowEnvironment,
    embedder: Embedder,
    cpu: ThreadPoolExecutor,
    bank: str,
) -> list[str]:
    pool = await create_pool(dsn, max_size=3)
    try:
        services = Services(
            dataclasses.replace(settings, database_url=dsn),
            pool,
            temporal_env.client,
            embedder,
            cpu,
        )
        app = create_app(_never)
        app.state.services = services
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://engram.test") as api:
            return await recall_ids(api, bank)
    finally:
        await pool.close()


async def test_restore_names_a_missing_file(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    database_url: str,
) -> None:
    monkeypatch.setenv("ENGRAM_DATABASE_URL", database_url)
    assert await asyncio.to_thread(cli.main, ["restore", str(tmp_path / "nothing.dump")]) == 1
    assert "nothing.dump: no such file" in capsys.readouterr().err


def _never() -> AbstractAsyncContextManager[Services]:
    raise AssertionError("the lifespan does not run under ASGITransport")
