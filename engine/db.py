"""Connection pool and schema migrations.

Migrations are numbered plain `.sql` files in `engine/migrations/`, applied in order inside
one transaction each and recorded in `schema_migrations`. A transaction-level advisory lock
serialises concurrent starters, so two processes starting at once apply each file once.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any, Final, TypeAlias, cast

import asyncpg
import numpy as np
from pgvector import HalfVector, Vector
from pgvector.asyncpg import register_vector

from engine.errors import ConfigurationError

# Arbitrary constant: the advisory-lock key all Engram processes agree on for migrations.
MIGRATION_LOCK_KEY = 0x656E6772616D  # "engram"
_MIGRATION_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")
# How long `spare` waits for a connection it judged free (another task may take it first).
SPARE_WAIT = 0.5

if TYPE_CHECKING:
    from asyncpg.pool import PoolConnectionProxy

    # What engine functions accept: a plain connection or one borrowed from a pool.
    Connection: TypeAlias = asyncpg.Connection[asyncpg.Record] | PoolConnectionProxy[asyncpg.Record]
    Pool: TypeAlias = asyncpg.Pool[asyncpg.Record]
else:
    Connection = asyncpg.Connection
    Pool = asyncpg.Pool


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


def load_migrations() -> list[Migration]:
    found: list[Migration] = []
    for entry in resources.files("engine.migrations").iterdir():
        match = _MIGRATION_NAME.match(entry.name)
        if match:
            found.append(Migration(int(match.group(1)), entry.name, entry.read_text()))
    found.sort(key=lambda m: m.version)
    return found


async def _init_connection(conn: asyncpg.Connection) -> None:
    await register_vector(conn)
    # Facts' embeddings are `halfvec` (migration 0026) and a query's is float32: a parameter
    # compared with the column takes the column's type, so the halfvec codec must take what
    # callers pass for a vector (a `Vector`, an array, a list) too.
    await conn.set_type_codec(
        "halfvec",
        encoder=_encode_halfvec,
        decoder=HalfVector.from_binary,
        format="binary",
    )
    await conn.set_type_codec(
        "jsonb", encoder=_json_dumps, decoder=_json_loads, schema="pg_catalog"
    )


def _encode_halfvec(value: object) -> bytes:
    if isinstance(value, HalfVector):
        return value.to_binary()
    if isinstance(value, Vector):
        return HalfVector(value.to_numpy()).to_binary()
    return HalfVector(np.asarray(value, dtype=np.float32)).to_binary()


def _json_dumps(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), default=str)


def _json_loads(value: str) -> object:
    return json.loads(value)


# Every statement is planned for its arguments. asyncpg prepares statements and PostgreSQL
# switches a prepared statement to a generic plan after five runs when it looks no worse; for
# the graph arm's shared-terms hop it is 3-8x slower (at 12k facts, under contention, the same
# arguments back to back: custom 36-145 ms, generic 212-597 ms), and with it recall's median
# 1,674 -> 1,267 ms (bench/recall_profile.py; docs/benchmarks.md, "Recall latency", fourth
# pass). Planning costs ~0.1-1 ms a statement, which the write path feels: `engram import` of
# LoCoMo (bench/import_locomo.py, quiet host) ran 106.8 turns/s planning every statement and
# 130.4 with PostgreSQL's own choice (its CPU 40.9 -> 28.5 s), so the worker passes
# custom_plans=False (docs/benchmarks.md, "Seventh pass").
SERVER_SETTINGS: Final = {"plan_cache_mode": "force_custom_plan"}


async def _keep_session(conn: Connection) -> None:
    """Released connections skip asyncpg's reset query (RESET ALL, pg_advisory_unlock_all,
    CLOSE ALL, UNLISTEN *): Engram keeps no session state — settings are SET LOCAL or the
    pool's own from each connection's start (`settings`), advisory locks are transaction
    locks, nothing LISTENs — and asyncpg still rolls back an open
    transaction first. The reset was one more round trip per release: a recall takes ~8
    connections, so 8 of its ~20 statements (bench/recall_latency.py)."""


class _Patient:
    """A connection whose statements wait up to `timeout` seconds rather than the pool's
    `command_timeout` (unless a call names its own); everything else is the connection's."""

    def __init__(self, conn: Connection, timeout: float) -> None:
        self._conn = conn
        self._timeout = timeout

    async def execute(self, query: str, *args: Any, **options: Any) -> str:
        return await self._conn.execute(query, *args, **{"timeout": self._timeout, **options})

    async def executemany(self, command: str, args: Any, **options: Any) -> None:
        await self._conn.executemany(command, args, **{"timeout": self._timeout, **options})

    async def fetch(self, query: str, *args: Any, **options: Any) -> Any:
        return await self._conn.fetch(query, *args, **{"timeout": self._timeout, **options})

    async def fetchrow(self, query: str, *args: Any, **options: Any) -> Any:
        return await self._conn.fetchrow(query, *args, **{"timeout": self._timeout, **options})

    async def fetchval(self, query: str, *args: Any, **options: Any) -> Any:
        return await self._conn.fetchval(query, *args, **{"timeout": self._timeout, **options})

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


def patient(conn: Connection, timeout: float) -> Connection:
    """`conn` for a step whose statements grow with its input: the retain upsert stores a
    batch's facts in one transaction, and inserting a long document's ~110,000 facts into the
    HNSW index is one statement of minutes, past the pool's 60 seconds."""
    return cast("Connection", _Patient(conn, timeout))


async def create_pool(
    dsn: str,
    *,
    min_size: int = 1,
    max_size: int = 10,
    on_connect: Callable[[asyncpg.Connection], Awaitable[None]] | None = None,
    custom_plans: bool = True,
    settings: Mapping[str, str] | None = None,
) -> Pool:
    """A pool whose connections know the vector and jsonb codecs; `on_connect` runs on each
    new connection after that (bench/recall_profile.py adds a query logger there).
    `custom_plans` plans every statement for its arguments (SERVER_SETTINGS, for recall);
    without it PostgreSQL picks generic plans where it judges them no worse. `settings`: more
    session settings every connection starts with (the server's: recall's HNSW scan settings,
    engine/recall/semantic.py SCAN_SESSION).

    The schema must exist first (the vector type is looked up per connection), so callers run
    `migrate` on a plain connection before opening the pool.
    """

    async def init(conn: asyncpg.Connection) -> None:
        await _init_connection(conn)
        if on_connect is not None:
            await on_connect(conn)

    pool = await asyncpg.create_pool(
        dsn,
        min_size=min_size,
        max_size=max_size,
        init=init,
        reset=_keep_session,
        command_timeout=60,
        server_settings={**(SERVER_SETTINGS if custom_plans else {}), **(settings or {})},
    )
    assert pool is not None
    return pool


@asynccontextmanager
async def spare(pool: Pool | None) -> AsyncIterator[Connection | None]:
    """A connection of `pool` if one is free now (idle, or room to open one), else None: for
    work that a second connection may share but must not wait for (a caller that holds a
    connection of the same pool could otherwise wait on connections held by callers waiting
    like it)."""
    if pool is None or (pool.get_idle_size() == 0 and pool.get_size() >= pool.get_max_size()):
        yield None
        return
    try:
        conn = await pool.acquire(timeout=SPARE_WAIT)
    except TimeoutError:
        yield None
        return
    try:
        yield conn
    finally:
        await pool.release(conn)


async def migrate(dsn: str, embedding_dim: int, embedding_space: str | None = None) -> list[str]:
    """Apply pending migrations; return the names applied. Safe to run concurrently.

    Also checks that the configured embedding model fits the stored vectors: the dimension
    always, and its vector space (`Embedder.space`) when given; the first start records both."""
    conn = await asyncpg.connect(dsn)
    applied: list[str] = []
    try:
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", MIGRATION_LOCK_KEY)
            await conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations ("
                " version integer PRIMARY KEY, name text NOT NULL,"
                " applied_at timestamptz NOT NULL DEFAULT now())"
            )
            done = {r["version"] for r in await conn.fetch("SELECT version FROM schema_migrations")}
            for migration in load_migrations():
                if migration.version in done:
                    continue
                await conn.execute(migration.sql.replace("{embedding_dim}", str(embedding_dim)))
                await conn.execute(
                    "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)",
                    migration.version,
                    migration.name,
                )
                applied.append(migration.name)
            await _check_embedding_dim(conn, embedding_dim)
            if embedding_space is not None:
                await _check_embedding_space(conn, embedding_space)
    finally:
        await conn.close()
    return applied


async def _check_embedding_dim(conn: asyncpg.Connection, embedding_dim: int) -> None:
    stored = await conn.fetchval("SELECT value FROM engram_meta WHERE key = 'embedding_dim'")
    if stored is None:
        await conn.execute(
            "INSERT INTO engram_meta (key, value) VALUES ('embedding_dim', $1)", str(embedding_dim)
        )
    elif int(stored) != embedding_dim:
        raise ConfigurationError(
            f"the database stores {stored}-dimensional embeddings but the configured model "
            f"produces {embedding_dim}; {await _model_advice(conn)}"
        )


async def _model_advice(conn: asyncpg.Connection) -> str:
    """What to do about a model that does not fit the stored vectors: name the model a
    re-embedding (engine/reembed.py) switched the database to, when one did."""
    model = await conn.fetchval("SELECT value FROM engram_meta WHERE key = 'embedding_model'")
    if model is not None:
        return f"the database was re-embedded with it: set ENGRAM_EMBEDDING_MODEL={model}"
    return "use the original model, or switch the database with `engram reembed --model`"


async def pending_migrations(conn: Connection) -> list[str]:
    """Names of migrations not yet applied (for /ready)."""
    exists = await conn.fetchval("SELECT to_regclass('schema_migrations') IS NOT NULL")
    done: set[int] = set()
    if exists:
        done = {r["version"] for r in await conn.fetch("SELECT version FROM schema_migrations")}
    return [m.name for m in load_migrations() if m.version not in done]


async def _check_embedding_space(conn: asyncpg.Connection, space: str) -> None:
    """Two models of one dimension still make incomparable vectors: a bank filled by one and
    searched with another would answer with noise, and nothing else would say so. A database
    from before this check records the space of the first start that checks it."""
    stored = await conn.fetchval("SELECT value FROM engram_meta WHERE key = 'embedding_space'")
    if stored is None:
        await conn.execute(
            "INSERT INTO engram_meta (key, value) VALUES ('embedding_space', $1)", space
        )
    elif stored != space:
        raise ConfigurationError(
            f"the database's vectors were made by {stored!r}, but ENGRAM_EMBEDDING_MODEL "
            f"gives {space!r}, whose vectors cannot be compared with them; "
            f"{await _model_advice(conn)}"
        )
