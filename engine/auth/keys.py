"""API keys: created and revoked on the server's machine (`engram keys`), checked per request.

A token is `engram_<key id>_<secret>`. Only an argon2id hash of the token is stored, so a
database dump yields no usable key. argon2 costs tens of milliseconds on purpose; a request
pays it once per token and process: `KeyVerifier` remembers tokens it has verified against the
stored hash, and still reads the key's row on every request (one primary-key lookup), so
revocation and expiry apply at once.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import secrets
from collections import OrderedDict
from dataclasses import dataclass
from datetime import UTC, datetime

import asyncpg
from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from engine.auth.principal import SCOPES, Principal
from engine.db import Connection
from engine.errors import InvalidInput, NotFound

TOKEN_PREFIX = "engram_"
# OWASP's minimum argon2id profile (19 MiB, 2 passes, 1 lane). A token carries 256 random
# bits, so the hash need not slow guessing the way a password's must; argon2-cffi's default
# (64 MiB, 3 passes, 4 lanes) made a token's first request take 1.9 s (median, n=20) on this
# shared 2-core host at load 17 (bench/auth_cost.py). Parameters live in each stored hash.
KEY_HASH_TIME_COST, KEY_HASH_MEMORY_KIB, KEY_HASH_LANES = 2, 19 * 1024, 1
# Tokens verified per process; a hit skips argon2, never the row lookup.
VERIFIED_CACHE_SIZE = 1024


@dataclass(frozen=True)
class ApiKey:
    id: str
    bank_id: str | None
    scope: str
    description: str
    rate_limit_per_minute: int | None
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None

    def active(self, now: datetime) -> bool:
        return self.revoked_at is None and (self.expires_at is None or self.expires_at > now)

    def principal(self) -> Principal:
        return Principal(self.id, self.bank_id, self.scope, self.rate_limit_per_minute)


_COLUMNS = (
    "id, bank_id, scope, description, rate_limit_per_minute, created_at, expires_at, revoked_at"
)
INSERT_KEY = f"""
INSERT INTO api_keys (id, bank_id, scope, secret_hash, description, rate_limit_per_minute,
                      expires_at)
VALUES ($1, $2, $3, $4, $5, $6, $7)
RETURNING {_COLUMNS}
"""
SELECT_KEYS = f"SELECT {_COLUMNS} FROM api_keys ORDER BY created_at, id"
REVOKE_KEY = f"""
UPDATE api_keys SET revoked_at = coalesce(revoked_at, now()) WHERE id = $1 RETURNING {_COLUMNS}
"""
SELECT_FOR_TOKEN = f"SELECT {_COLUMNS}, secret_hash FROM api_keys WHERE id = $1"
COUNT_ACTIVE = """
SELECT count(*) FROM api_keys
WHERE revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())
"""


def _key(row: asyncpg.Record) -> ApiKey:
    return ApiKey(
        id=row["id"],
        bank_id=row["bank_id"],
        scope=row["scope"],
        description=row["description"],
        rate_limit_per_minute=row["rate_limit_per_minute"],
        created_at=row["created_at"],
        expires_at=row["expires_at"],
        revoked_at=row["revoked_at"],
    )


def parse_token(token: str) -> str | None:
    """The key id a token names, or None when it is not one of ours."""
    if not token.startswith(TOKEN_PREFIX):
        return None
    key_id, sep, secret = token[len(TOKEN_PREFIX) :].partition("_")
    if not sep or not secret or not key_id.isalnum():
        return None
    return key_id


async def create_key(
    conn: Connection,
    hasher: PasswordHasher,
    *,
    bank_id: str | None,
    scope: str,
    expires_at: datetime | None = None,
    description: str = "",
    rate_limit_per_minute: int | None = None,
) -> tuple[ApiKey, str]:
    """The stored key and its token, which exists nowhere else: show it once."""
    if scope not in SCOPES:
        raise InvalidInput("scope", f"must be one of {', '.join(SCOPES)}, got {scope!r}")
    if bank_id is None and scope != "admin":
        raise InvalidInput("bank", "a read or write key names its bank")
    if expires_at is not None and expires_at <= datetime.now(UTC):
        raise InvalidInput("expires", "must be in the future")
    if rate_limit_per_minute is not None and rate_limit_per_minute <= 0:
        raise InvalidInput("rate_limit", "must be positive")
    key_id = secrets.token_hex(6)
    token = f"{TOKEN_PREFIX}{key_id}_{secrets.token_urlsafe(32)}"
    row = await conn.fetchrow(
        INSERT_KEY,
        key_id,
        bank_id,
        scope,
        hasher.hash(token),
        description,
        rate_limit_per_minute,
        expires_at,
    )
    assert row is not None
    return _key(row), token


async def list_keys(conn: Connection) -> list[ApiKey]:
    return [_key(row) for row in await conn.fetch(SELECT_KEYS)]


async def revoke_key(conn: Connection, key_id: str) -> ApiKey:
    row = await conn.fetchrow(REVOKE_KEY, key_id)
    if row is None:
        raise NotFound("key", key_id)
    return _key(row)


async def active_key_count(conn: Connection) -> int:
    count = await conn.fetchval(COUNT_ACTIVE)
    return int(count or 0)


def key_hasher() -> PasswordHasher:
    return PasswordHasher(
        time_cost=KEY_HASH_TIME_COST, memory_cost=KEY_HASH_MEMORY_KIB, parallelism=KEY_HASH_LANES
    )


class KeyVerifier:
    """Turns a bearer token into a principal, or None for a token that is not (or no longer)
    a valid key."""

    def __init__(self, hasher: PasswordHasher | None = None) -> None:
        self.hasher = hasher or key_hasher()
        # key id -> (sha256 of a token that verified, the stored hash it verified against)
        self._verified: OrderedDict[str, tuple[bytes, str]] = OrderedDict()

    async def principal(self, conn: Connection, token: str) -> Principal | None:
        key_id = parse_token(token)
        if key_id is None:
            return None
        row = await conn.fetchrow(SELECT_FOR_TOKEN, key_id)
        if row is None:
            return None
        key = _key(row)
        if not key.active(datetime.now(UTC)):
            return None
        stored: str = row["secret_hash"]
        digest = hashlib.sha256(token.encode()).digest()
        cached = self._verified.get(key_id)
        if cached is not None and hmac.compare_digest(cached[0], digest) and cached[1] == stored:
            self._verified.move_to_end(key_id)
            return key.principal()
        if not await asyncio.to_thread(self._verify, stored, token):
            return None
        self._verified[key_id] = (digest, stored)
        if len(self._verified) > VERIFIED_CACHE_SIZE:
            self._verified.popitem(last=False)
        return key.principal()

    def _verify(self, stored: str, token: str) -> bool:
        try:
            return self.hasher.verify(stored, token)
        except (VerificationError, InvalidHashError):
            return False
