"""Mental models in PostgreSQL: create, read, list, update, delete, clear, and versions."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import asyncpg

from engine.db import Connection
from engine.errors import Conflict, InvalidInput, NotFound
from engine.mental_models.payloads import Kind
from engine.store.memories import TagsMatch, tags_clause

ID_PATTERN = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,98}[a-z0-9])?$")
MIN_MAX_TOKENS = 256
MAX_MAX_TOKENS = 8192


@dataclass(frozen=True)
class MentalModel:
    bank_id: str
    id: str
    name: str
    source_query: str
    questions: list[str]
    content: str
    tags: list[str]
    max_tokens: int
    trigger: dict[str, Any]
    schedule_id: str | None
    kind: Kind
    based_on: list[dict[str, Any]]
    reflect_response: dict[str, Any] | None
    version: int
    evidence_digest: str | None
    last_refreshed_at: datetime | None
    last_memory_seen_at: datetime | None
    last_refresh_failed_at: datetime | None
    last_refresh_error: str | None
    created_at: datetime
    updated_at: datetime

    @property
    def asked(self) -> list[str]:
        """The questions a refresh answers: a report's list, or the model's source query."""
        return self.questions if self.kind == "report" and self.questions else [self.source_query]


@dataclass(frozen=True)
class NewModel:
    bank_id: str
    id: str
    name: str
    source_query: str
    trigger: dict[str, Any]
    tags: list[str] = field(default_factory=list)
    max_tokens: int = 2048
    kind: Kind = "model"
    questions: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ModelChanges:
    """None leaves a field as it is."""

    name: str | None = None
    source_query: str | None = None
    questions: list[str] | None = None
    tags: list[str] | None = None
    max_tokens: int | None = None
    trigger: dict[str, Any] | None = None


@dataclass(frozen=True)
class Version:
    version: int
    content: str
    based_on: list[dict[str, Any]]
    source_query: str
    refreshed_at: datetime
    reason: str
    operation_id: str


_COLUMNS = """
bank_id, id, name, source_query, questions, content, tags, max_tokens, trg AS trigger,
schedule_id, kind, based_on, reflect_response, version, evidence_digest, last_refreshed_at,
last_memory_seen_at, last_refresh_failed_at, last_refresh_error, created_at, updated_at
"""


def _model(row: asyncpg.Record) -> MentalModel:
    return MentalModel(**dict(row))


def check_id(model_id: str) -> str:
    if not ID_PATTERN.match(model_id):
        raise InvalidInput(
            "id", "must be 1-100 lowercase letters, digits and hyphens (not at either end)"
        )
    return model_id


def check_max_tokens(value: int) -> int:
    if not MIN_MAX_TOKENS <= value <= MAX_MAX_TOKENS:
        raise InvalidInput("max_tokens", f"must be between {MIN_MAX_TOKENS} and {MAX_MAX_TOKENS}")
    return value


def check_text(field_name: str, value: str) -> str:
    if not value.strip():
        raise InvalidInput(field_name, "must not be empty")
    return value


_INSERT = f"""
INSERT INTO mental_models
    (bank_id, id, name, source_query, questions, tags, max_tokens, trg, kind)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
RETURNING {_COLUMNS}
"""


async def create_model(conn: Connection, new: NewModel) -> MentalModel:
    try:
        row = await conn.fetchrow(
            _INSERT,
            new.bank_id,
            new.id,
            new.name,
            new.source_query,
            new.questions,
            new.tags,
            new.max_tokens,
            new.trigger,
            new.kind,
        )
    except asyncpg.UniqueViolationError as exc:
        raise Conflict(f"mental model {new.id!r} already exists in bank {new.bank_id!r}") from exc
    assert row is not None
    return _model(row)


async def get_model(conn: Connection, bank_id: str, model_id: str) -> MentalModel:
    row = await conn.fetchrow(
        f"SELECT {_COLUMNS} FROM mental_models WHERE bank_id = $1 AND id = $2", bank_id, model_id
    )
    if row is None:
        raise NotFound("mental model", model_id)
    return _model(row)


async def find_model(conn: Connection, bank_id: str, model_id: str) -> MentalModel | None:
    try:
        return await get_model(conn, bank_id, model_id)
    except NotFound:
        return None


def _list_sql(tags_match: TagsMatch) -> str:
    where = (
        "bank_id = $1 AND ($2::text IS NULL OR kind = $2)"
        f" AND {tags_clause('tags', '$3::text[]', tags_match)}"
    )
    return (
        f"SELECT {_COLUMNS}, count(*) OVER () AS total FROM mental_models WHERE {where}"
        " ORDER BY created_at, id LIMIT $4 OFFSET $5"
    )


async def list_models(
    conn: Connection,
    bank_id: str,
    tags: list[str],
    tags_match: TagsMatch = "any",
    limit: int = 100,
    offset: int = 0,
    kind: Kind | None = None,
) -> tuple[list[MentalModel], int]:
    rows = await conn.fetch(_list_sql(tags_match), bank_id, kind, tags, limit, offset)
    if not rows and offset > 0:
        total = await conn.fetchval(
            f"SELECT count(*) FROM mental_models WHERE bank_id = $1 AND ($2::text IS NULL OR"
            f" kind = $2) AND {tags_clause('tags', '$3::text[]', tags_match)}",
            bank_id,
            kind,
            tags,
        )
        return [], int(total)
    models = []
    for row in rows:
        values = dict(row)
        values.pop("total")
        models.append(MentalModel(**values))
    return models, int(rows[0]["total"]) if rows else 0


_UPDATE = f"""
UPDATE mental_models SET
    name = coalesce($3, name),
    source_query = coalesce($4, source_query),
    questions = coalesce($5, questions),
    tags = coalesce($6, tags),
    max_tokens = coalesce($7, max_tokens),
    trg = coalesce($8, trg),
    updated_at = now()
WHERE bank_id = $1 AND id = $2
RETURNING {_COLUMNS}
"""


async def update_model(
    conn: Connection, bank_id: str, model_id: str, changes: ModelChanges
) -> MentalModel:
    row = await conn.fetchrow(
        _UPDATE,
        bank_id,
        model_id,
        changes.name,
        changes.source_query,
        changes.questions,
        changes.tags,
        changes.max_tokens,
        changes.trigger,
    )
    if row is None:
        raise NotFound("mental model", model_id)
    return _model(row)


async def set_schedule_id(
    conn: Connection, bank_id: str, model_id: str, schedule_id: str | None
) -> None:
    await conn.execute(
        "UPDATE mental_models SET schedule_id = $3 WHERE bank_id = $1 AND id = $2",
        bank_id,
        model_id,
        schedule_id,
    )


async def delete_model(conn: Connection, bank_id: str, model_id: str) -> MentalModel:
    """Deletes the model and its versions; returns what was deleted (for its schedule)."""
    row = await conn.fetchrow(
        f"DELETE FROM mental_models WHERE bank_id = $1 AND id = $2 RETURNING {_COLUMNS}",
        bank_id,
        model_id,
    )
    if row is None:
        raise NotFound("mental model", model_id)
    return _model(row)


async def clear_model(conn: Connection, bank_id: str, model_id: str) -> MentalModel:
    """Empties the content and forgets the evidence digest, so the next refresh runs in full.
    The version history is kept."""
    row = await conn.fetchrow(
        f"UPDATE mental_models SET content = '', embedding = NULL, based_on = '[]',"
        f" based_on_ids = '{{}}', reflect_response = NULL, evidence_digest = NULL,"
        f" updated_at = now() WHERE bank_id = $1 AND id = $2 RETURNING {_COLUMNS}",
        bank_id,
        model_id,
    )
    if row is None:
        raise NotFound("mental model", model_id)
    return _model(row)


async def list_versions(conn: Connection, bank_id: str, model_id: str) -> list[Version]:
    """Newest first."""
    await get_model(conn, bank_id, model_id)
    rows = await conn.fetch(
        "SELECT version, content, based_on, source_query, refreshed_at, reason, operation_id"
        " FROM mental_model_versions WHERE bank_id = $1 AND id = $2 ORDER BY version DESC",
        bank_id,
        model_id,
    )
    return [Version(**dict(r)) for r in rows]


async def models_refreshed_after_consolidation(conn: Connection, bank_id: str) -> list[str]:
    rows = await conn.fetch(
        "SELECT id FROM mental_models WHERE bank_id = $1"
        " AND (trg ->> 'refresh_after_consolidation')::boolean ORDER BY id",
        bank_id,
    )
    return [r["id"] for r in rows]


_BANK_SCHEDULES = (
    "SELECT schedule_id FROM mental_models WHERE bank_id = $1 AND schedule_id IS NOT NULL"
)


async def bank_schedule_ids(conn: Connection, bank_id: str) -> list[str]:
    """The Temporal Schedules of a bank's models and reports (to delete with the bank)."""
    return [row["schedule_id"] for row in await conn.fetch(_BANK_SCHEDULES, bank_id)]
