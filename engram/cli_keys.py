"""`engram keys create|list|revoke`: API keys, managed on the server's machine straight in the
database the server uses (the same settings: ENGRAM_DATABASE_URL, else the embedded one in
ENGRAM_HOME). A key's token is printed once and stored nowhere but as a hash."""

from __future__ import annotations

import argparse
import asyncio
import getpass
import re
from datetime import UTC, datetime, timedelta
from typing import Any, TextIO

import asyncpg

from engine.auth.audit import AuditEntry, record_audit
from engine.auth.keys import ApiKey, create_key, key_hasher, list_keys, revoke_key
from engine.auth.principal import SCOPES
from engine.db import Connection, create_pool
from engine.errors import EngramError
from engine.settings import Settings
from engram.cli_support import UsageError, command, table
from engram.postgres import EmbeddedPostgres

EPILOG_KEYS = """examples:
  engram keys create --bank alice --scope write           # an agent writing alice's memory
  engram keys create --bank alice --scope read --expires 30d
  engram keys create --scope admin                         # every bank, bank management
  engram keys list
  engram keys revoke 3f9a1c2b7d4e

Send a key as `Authorization: Bearer <key>` (the CLI reads ENGRAM_API_KEY). Run these on the
server's machine, with the server's ENGRAM_HOME / ENGRAM_DATABASE_URL.
"""
_DURATION = re.compile(r"^(\d+)([dhm])$")
UNITS = {"d": timedelta(days=1), "h": timedelta(hours=1), "m": timedelta(minutes=1)}


class KeysError(Exception):
    """The database could not be reached or is not Engram's yet; exit code 1."""


def add_keys_parser(commands: Any) -> None:
    keys = command(commands, "keys", "create, list or revoke API keys", EPILOG_KEYS)
    actions = keys.add_subparsers(dest="keys_command", required=True, metavar="ACTION")
    create = command(actions, "create", "create a key and print it once", EPILOG_KEYS)
    create.add_argument("--bank", "-b", help="the bank (omit only for an all-banks admin key)")
    create.add_argument("--scope", required=True, choices=SCOPES)
    create.add_argument("--expires", help="a duration (30d, 12h) or an ISO-8601 date-time")
    create.add_argument("--description", default="", help="what the key is for")
    create.add_argument("--rate-limit", type=int, help="requests a minute (default: server's)")
    command(actions, "list", "list keys (never their secrets)", EPILOG_KEYS)
    revoke = command(actions, "revoke", "revoke a key at once", EPILOG_KEYS)
    revoke.add_argument("key_id", metavar="KEY_ID")


def parse_expiry(raw: str | None, now: datetime) -> datetime | None:
    if raw is None:
        return None
    match = _DURATION.match(raw.strip())
    if match:
        amount, unit = int(match.group(1)), match.group(2)
        return now + amount * UNITS[unit]
    try:
        value = datetime.fromisoformat(raw)
    except ValueError as exc:
        raise UsageError(f"--expires: {raw!r} is neither a duration (30d) nor a date") from exc
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def database_url(settings: Settings) -> str:
    if settings.database_url:
        return settings.database_url
    return EmbeddedPostgres(settings.home / "postgres", settings.home / "logs" / "postgres.log").dsn


def cmd_keys(settings: Settings, args: argparse.Namespace, out: TextIO) -> int:
    return asyncio.run(_keys(settings, args, out))


async def _keys(settings: Settings, args: argparse.Namespace, out: TextIO) -> int:
    dsn = database_url(settings)
    try:
        pool = await create_pool(dsn, min_size=1, max_size=1)
    except (OSError, asyncpg.PostgresError, ValueError) as exc:  # ValueError: no pgvector yet
        raise KeysError(
            f"cannot use Engram's database ({exc}); has `engram up` started it once?"
        ) from exc
    try:
        async with pool.acquire() as conn:
            return await _run(conn, args, out)
    except asyncpg.UndefinedTableError as exc:
        raise KeysError("the database has no keys table yet: start the server once") from exc
    except EngramError as exc:
        raise UsageError(str(exc)) from exc
    finally:
        await pool.close()


async def _run(conn: Connection, args: argparse.Namespace, out: TextIO) -> int:
    now = datetime.now(UTC)
    if args.keys_command == "list":
        rows = [_row(key, now) for key in await list_keys(conn)]
        if not rows:
            out.write("no keys\n")
            return 0
        table(rows, ("KEY", "BANK", "SCOPE", "STATE", "EXPIRES", "DESCRIPTION"), out)
        return 0
    if args.keys_command == "revoke":
        async with conn.transaction():
            key = await revoke_key(conn, args.key_id)
            await _audit(conn, "keys.revoke", key, now)
        out.write(f"key {key.id} revoked\n")
        return 0
    async with conn.transaction():
        key, token = await create_key(
            conn,
            key_hasher(),
            bank_id=args.bank,
            scope=args.scope,
            expires_at=parse_expiry(args.expires, now),
            description=args.description,
            rate_limit_per_minute=args.rate_limit,
        )
        await _audit(conn, "keys.create", key, now)
    where = f"bank {key.bank_id}" if key.bank_id else "every bank"
    out.write(f"key {key.id}: {key.scope} on {where}; shown once, keep it now:\n{token}\n")
    return 0


def _row(key: ApiKey, now: datetime) -> tuple[str, ...]:
    if key.revoked_at is not None:
        state = "revoked"
    elif not key.active(now):
        state = "expired"
    else:
        state = "active"
    expires = key.expires_at.isoformat(timespec="minutes") if key.expires_at else "never"
    return (key.id, key.bank_id or "*", key.scope, state, expires, key.description)


async def _audit(conn: Connection, action: str, key: ApiKey, now: datetime) -> None:
    await record_audit(
        conn,
        AuditEntry(
            action=action,
            transport="cli",
            bank_id=key.bank_id,
            key_id=key.id,
            outcome="success",
            started_at=now,
            ended_at=datetime.now(UTC),
            metadata={"scope": key.scope, "os_user": getpass.getuser()},
        ),
    )
