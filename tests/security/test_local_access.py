"""Only Engram's user reaches the embedded PostgreSQL and its files; keys are managed on the
server's machine with `engram keys`; a network bind without keys refuses to start."""

from __future__ import annotations

import asyncio
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import pytest

from engine.auth.audit import AuditEntry, list_audit, record_audit, sweep_audit
from engine.db import Pool
from engine.errors import ConfigurationError
from engine.settings import SecuritySettings, Settings
from engram import cli
from engram.postgres import EmbeddedPostgres
from server.main import auth_summary, check_exposure
from workflows.converter import load_payload_key


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def test_embedded_postgres_is_private_and_authenticates(postgres: EmbeddedPostgres) -> None:
    socket = next(postgres.socket_dir.glob(".s.PGSQL.*[0-9]"))
    assert stat.S_ISSOCK(socket.stat().st_mode)
    assert _mode(socket) & 0o077 == 0  # srwx------: no other user may connect
    assert _mode(postgres.socket_dir) == 0o700
    assert _mode(postgres.data_dir) == 0o700
    assert _mode(postgres.password_file) == 0o600
    assert _mode(postgres.log_path) == 0o600
    without_password = f"postgresql://postgres@/postgres?host={postgres.socket_dir}"
    with pytest.raises(
        (asyncpg.InvalidPasswordError, asyncpg.InvalidAuthorizationSpecificationError)
    ):
        await asyncpg.connect(without_password)
    wrong = f"postgresql://postgres:wrong@/postgres?host={postgres.socket_dir}"
    with pytest.raises(asyncpg.InvalidPasswordError):
        await asyncpg.connect(wrong)
    conn = await asyncpg.connect(postgres.admin_dsn())
    await conn.close()


def test_payload_key_is_made_private_once(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / "home")
    first = load_payload_key(settings)
    assert load_payload_key(settings) == first and len(first) == 32
    assert _mode(tmp_path / "home" / "payload.key") == 0o600
    assert _mode(tmp_path / "home") == 0o700
    (tmp_path / "home" / "payload.key").chmod(0o644)
    with pytest.raises(ConfigurationError, match="readable only by its owner"):
        load_payload_key(settings)


def test_a_network_bind_needs_keys_or_an_explicit_off() -> None:
    exposed = Settings(home=Path("."), api_host="0.0.0.0")
    with pytest.raises(ConfigurationError, match="ENGRAM_AUTH=keys"):
        check_exposure(exposed)
    check_exposure(Settings(home=Path("."), api_host="0.0.0.0", security=SecuritySettings("keys")))
    check_exposure(Settings(home=Path("."), api_host="0.0.0.0", security=SecuritySettings("off")))
    check_exposure(Settings(home=Path(".")))  # loopback: open is fine
    assert auth_summary(Settings(home=Path(".")), 0).startswith("open")
    assert auth_summary(Settings(home=Path(".")), 1).startswith("API keys required")
    with pytest.raises(ConfigurationError, match="ENGRAM_AUTH"):
        Settings.from_env({"ENGRAM_AUTH": "maybe"})


async def test_keys_cli_creates_lists_and_revokes(
    database_url: str,
    pool: Pool,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("ENGRAM_DATABASE_URL", database_url)

    def run(*argv: str) -> tuple[int, str]:
        code = cli.main(list(argv))
        return code, capsys.readouterr().out

    # cli.main runs its own event loop: give it a thread.
    code, out = await asyncio.to_thread(
        run, "keys", "create", "--bank", "alice", "--scope", "read", "--expires", "30d"
    )
    assert code == 0, out
    token = out.strip().splitlines()[-1]
    key_id = token.split("_")[1]
    async with pool.acquire() as conn:
        stored = await conn.fetchval("SELECT secret_hash FROM api_keys WHERE id = $1", key_id)
        assert stored.startswith("$argon2id$") and token not in stored
        audited = await conn.fetchval(
            "SELECT count(*) FROM audit_logs WHERE key_id = $1 AND action = 'keys.create'", key_id
        )
        assert audited == 1
    code, out = await asyncio.to_thread(run, "keys", "list")
    assert code == 0 and key_id in out and "active" in out and token not in out
    code, out = await asyncio.to_thread(run, "keys", "revoke", key_id)
    assert code == 0 and "revoked" in out
    code, out = await asyncio.to_thread(run, "keys", "list")
    assert "revoked" in out
    code, _ = await asyncio.to_thread(run, "keys", "create", "--scope", "write")
    assert code == 2  # a write key names its bank


async def test_audit_sweep_deletes_only_entries_past_retention(pool: Pool) -> None:
    now = datetime.now(UTC)
    old = AuditEntry("DELETE /x", "http", "sweep-bank", None, "success", now - timedelta(days=91))
    recent = AuditEntry("DELETE /x", "http", "sweep-bank", None, "success", now)
    async with pool.acquire() as conn:
        await record_audit(conn, old)
        await record_audit(conn, recent)
        assert await sweep_audit(conn, now - timedelta(days=90)) == 1
        kept, total = await list_audit(conn, "sweep-bank")
    assert total == 1 and [e.id for e in kept] == [recent.id]
