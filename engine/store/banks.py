"""Memory banks: one isolated memory per agent or user, created on first use."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from typing import Any

import asyncpg

from engine.db import Connection
from engine.errors import InvalidInput, NotFound
from engine.lifecycle.access_state import drop_access
from engine.lifecycle.policy import DEFAULT_PRESET, LifecyclePolicy, resolve_policy
from engine.store.locks import consolidation_lock

EXTRACTION_MODES = ("llm", "local", "none")
MIN_CHUNK_SIZE = 200
MAX_CHUNK_SIZE = 100_000
DEFAULT_CHUNK_SIZE = 3000


@dataclass(frozen=True)
class Disposition:
    """How reflect reasons for this bank, each trait 1 (low) to 5 (high)."""

    skepticism: int = 3
    literalism: int = 3
    empathy: int = 3

    def validated(self) -> Disposition:
        for name in ("skepticism", "literalism", "empathy"):
            value = getattr(self, name)
            if not isinstance(value, int) or not 1 <= value <= 5:
                raise InvalidInput(f"disposition.{name}", "must be an integer from 1 to 5")
        return self


@dataclass(frozen=True)
class BankConfig:
    disposition: Disposition = field(default_factory=Disposition)
    retain_mission: str = ""
    extraction_mode: str = ""  # empty: the server default (llm with a key, else local)
    chunk_size: int = DEFAULT_CHUNK_SIZE
    enable_observations: bool = True
    enable_entity_links: bool = True
    enable_semantic_links: bool = True
    enable_temporal_links: bool = True
    enable_causal_links: bool = True
    directives: tuple[str, ...] = ()
    # Memory lifecycle (engine/lifecycle/policy.py): a preset and per-setting overrides.
    lifecycle_preset: str = DEFAULT_PRESET
    lifecycle: dict[str, Any] = field(default_factory=dict)

    @property
    def lifecycle_policy(self) -> LifecyclePolicy:
        return resolve_policy(self.lifecycle_preset, self.lifecycle)

    # The MCP tools this bank exposes (empty: all of them).
    mcp_enabled_tools: tuple[str, ...] = ()

    def validated(self) -> BankConfig:
        self.disposition.validated()
        if not isinstance(self.lifecycle, dict):
            raise InvalidInput("lifecycle", "must be an object of lifecycle settings")
        resolve_policy(self.lifecycle_preset, self.lifecycle)
        if self.extraction_mode not in ("", *EXTRACTION_MODES):
            raise InvalidInput("extraction_mode", f"must be one of {', '.join(EXTRACTION_MODES)}")
        if not MIN_CHUNK_SIZE <= self.chunk_size <= MAX_CHUNK_SIZE:
            raise InvalidInput(
                "chunk_size", f"must be between {MIN_CHUNK_SIZE} and {MAX_CHUNK_SIZE}"
            )
        return self

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["directives"] = list(self.directives)
        data["mcp_enabled_tools"] = list(self.mcp_enabled_tools)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BankConfig:
        known = {f for f in cls.__dataclass_fields__}
        values = {k: v for k, v in data.items() if k in known}
        if "disposition" in values:
            values["disposition"] = Disposition(**values["disposition"])
        if "directives" in values:
            values["directives"] = tuple(values["directives"])
        if "mcp_enabled_tools" in values:
            values["mcp_enabled_tools"] = tuple(values["mcp_enabled_tools"])
        return cls(**values)


@dataclass(frozen=True)
class Bank:
    bank_id: str
    name: str
    mission: str
    config: BankConfig
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class BankStats:
    facts: int
    observations: int
    documents: int
    entities: int
    links: int


_SELECT = "SELECT bank_id, name, mission, config, created_at, updated_at FROM banks"


def _bank(row: asyncpg.Record) -> Bank:
    return Bank(
        bank_id=row["bank_id"],
        name=row["name"],
        mission=row["mission"],
        config=BankConfig.from_json(row["config"]),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def validate_bank_id(bank_id: str) -> str:
    if not bank_id or len(bank_id) > 200 or not bank_id.isprintable() or "/" in bank_id:
        raise InvalidInput("bank_id", "must be 1-200 printable characters without '/'")
    return bank_id


async def ensure_bank(conn: Connection, bank_id: str) -> Bank:
    """The bank, created with defaults when it does not exist yet."""
    validate_bank_id(bank_id)
    await conn.execute(
        "INSERT INTO banks (bank_id, name, config) VALUES ($1, $1, $2) ON CONFLICT DO NOTHING",
        bank_id,
        BankConfig().to_json(),
    )
    return await get_bank(conn, bank_id)


async def get_bank(conn: Connection, bank_id: str) -> Bank:
    row = await conn.fetchrow(f"{_SELECT} WHERE bank_id = $1", bank_id)
    if row is None:
        raise NotFound("bank", bank_id)
    return _bank(row)


async def list_banks(conn: Connection) -> list[Bank]:
    return [_bank(row) for row in await conn.fetch(f"{_SELECT} ORDER BY bank_id")]


async def put_bank(
    conn: Connection,
    bank_id: str,
    *,
    name: str | None = None,
    mission: str | None = None,
    config_changes: dict[str, Any] | None = None,
) -> Bank:
    """Create or update a bank; only the given fields change."""
    async with conn.transaction():
        current = await ensure_bank(conn, bank_id)
        config = current.config
        if config_changes:
            changes = dict(config_changes)
            if "disposition" in changes:
                changes["disposition"] = replace(config.disposition, **changes["disposition"])
            if "directives" in changes:
                changes["directives"] = tuple(changes["directives"])
            config = replace(config, **changes)
        config.validated()
        row = await conn.fetchrow(
            "UPDATE banks SET name = $2, mission = $3, config = $4, updated_at = now()"
            " WHERE bank_id = $1 RETURNING bank_id, name, mission, config, created_at, updated_at",
            bank_id,
            current.name if name is None else name,
            current.mission if mission is None else mission,
            config.to_json(),
        )
        assert row is not None
        return _bank(row)


async def reset_bank_config(conn: Connection, bank_id: str) -> Bank:
    row = await conn.fetchrow(
        f"UPDATE banks SET config = $2, updated_at = now() WHERE bank_id = $1"
        f" RETURNING {_SELECT.removeprefix('SELECT ').removesuffix(' FROM banks')}",
        bank_id,
        BankConfig().to_json(),
    )
    if row is None:
        raise NotFound("bank", bank_id)
    return _bank(row)


# The write pipeline's staging (engine/retain/documents.py, claims.py), by bank.
_STAGING = (
    "staged_facts",
    "retain_documents",
    "document_plans",
    "document_claims",
    "document_waiters",
)


async def delete_bank(conn: Connection, bank_id: str) -> None:
    async with conn.transaction():
        await consolidation_lock(conn, bank_id)
        deleted = await conn.fetchval("DELETE FROM banks WHERE bank_id = $1 RETURNING 1", bank_id)
        if deleted is None:
            raise NotFound("bank", bank_id)
        await conn.execute("DELETE FROM bank_term_stats WHERE bank_id = $1", bank_id)
        await drop_access(conn, bank_id, None)
        for table in _STAGING:
            await conn.execute(f"DELETE FROM {table} WHERE bank_id = $1", bank_id)
        await conn.execute("DELETE FROM operations WHERE bank_id = $1", bank_id)


_STATS = """
SELECT
  (SELECT count(*) FROM memory_units WHERE bank_id = $1 AND fact_type <> 'observation') AS facts,
  (SELECT count(*) FROM memory_units WHERE bank_id = $1 AND fact_type = 'observation')
    AS observations,
  (SELECT count(*) FROM documents WHERE bank_id = $1) AS documents,
  (SELECT count(*) FROM entities WHERE bank_id = $1) AS entities,
  (SELECT count(*) FROM memory_links WHERE bank_id = $1) AS links
"""


async def bank_stats(conn: Connection, bank_id: str) -> BankStats:
    row = await conn.fetchrow(_STATS, bank_id)
    assert row is not None
    return BankStats(**dict(row))
