"""`engram migrate`: what a deploy's migration Job runs before servers and workers roll out."""

from __future__ import annotations

import asyncio

import pytest

from engram import cli
from engram.postgres import EmbeddedPostgres


async def test_migrate_applies_every_migration_once(
    postgres: EmbeddedPostgres,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("ENGRAM_DATABASE_URL", postgres.create_database("t_migrate_command"))
    assert await asyncio.to_thread(cli.main, ["migrate"]) == 0
    first = capsys.readouterr().out
    assert first.startswith("applied 0001_initial.sql")
    assert await asyncio.to_thread(cli.main, ["migrate"]) == 0
    assert capsys.readouterr().out == "the schema is up to date\n"
