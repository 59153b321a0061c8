"""Directives: named rules reflect follows (Hindsight's directive resource)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from engine.db import Connection
from engine.errors import NotFound
from engine.store.memories import TagsMatch, tags_clause


@dataclass(frozen=True)
class Directive:
    bank_id: str
    id: str
    name: str
    content: str
    priority: int
    is_active: bool
    tags: list[str]
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class DirectiveChanges:
    """None leaves a field as it is."""

    name: str | None = None
    content: str | None = None
    priority: int | None = None
    is_active: bool | None = None
    tags: list[str] | None = None


_COLUMNS = "bank_id, id, name, content, priority, is_active, tags, created_at, updated_at"

_INSERT = f"""
INSERT INTO directives (bank_id, id, name, content, priority, is_active, tags)
VALUES ($1, $2, $3, $4, $5, $6, $7)
RETURNING {_COLUMNS}
"""


def _directive(row: asyncpg.Record) -> Directive:
    return Directive(**dict(row))


async def create_directive(
    conn: Connection,
    bank_id: str,
    directive_id: str,
    name: str,
    content: str,
    priority: int,
    is_active: bool,
    tags: list[str],
) -> Directive:
    row = await conn.fetchrow(
        _INSERT, bank_id, directive_id, name, content, priority, is_active, tags
    )
    assert row is not None
    return _directive(row)


async def list_directives(
    conn: Connection,
    bank_id: str,
    tags: list[str],
    tags_match: TagsMatch,
    active_only: bool,
    limit: int,
    offset: int,
) -> tuple[list[Directive], int]:
    where = "bank_id = $1 AND ($2 = false OR is_active) AND " + tags_clause(
        "tags", "$3::text[]", tags_match
    )
    rows = await conn.fetch(
        f"SELECT {_COLUMNS}, count(*) OVER () AS total FROM directives WHERE {where}"
        " ORDER BY priority DESC, created_at, id LIMIT $4 OFFSET $5",
        bank_id,
        active_only,
        tags,
        limit,
        offset,
    )
    total = rows[0]["total"] if rows else 0
    if not rows and offset:
        total = await conn.fetchval(
            f"SELECT count(*) FROM directives WHERE {where}", bank_id, active_only, tags
        )
    return [_directive_of(r) for r in rows], int(total)


def _directive_of(row: asyncpg.Record) -> Directive:
    data = dict(row)
    data.pop("total", None)
    return Directive(**data)


async def get_directive(conn: Connection, bank_id: str, directive_id: str) -> Directive:
    row = await conn.fetchrow(
        f"SELECT {_COLUMNS} FROM directives WHERE bank_id = $1 AND id = $2", bank_id, directive_id
    )
    if row is None:
        raise NotFound("directive", directive_id)
    return _directive(row)


_UPDATE = f"""
UPDATE directives SET
  name = coalesce($3, name),
  content = coalesce($4, content),
  priority = coalesce($5, priority),
  is_active = coalesce($6, is_active),
  tags = coalesce($7, tags),
  updated_at = now()
WHERE bank_id = $1 AND id = $2
RETURNING {_COLUMNS}
"""


async def update_directive(
    conn: Connection, bank_id: str, directive_id: str, changes: DirectiveChanges
) -> Directive:
    row = await conn.fetchrow(
        _UPDATE,
        bank_id,
        directive_id,
        changes.name,
        changes.content,
        changes.priority,
        changes.is_active,
        changes.tags,
    )
    if row is None:
        raise NotFound("directive", directive_id)
    return _directive(row)


async def delete_directive(conn: Connection, bank_id: str, directive_id: str) -> None:
    deleted = await conn.fetchval(
        "DELETE FROM directives WHERE bank_id = $1 AND id = $2 RETURNING 1", bank_id, directive_id
    )
    if deleted is None:
        raise NotFound("directive", directive_id)


async def standing_directives(
    conn: Connection,
    bank_id: str,
    tags: Sequence[str] = (),
    tags_match: TagsMatch = "any",
    *,
    apply_all: bool = False,
) -> list[Directive]:
    """What reflect follows for a question, highest priority first: the active untagged
    directives always; a tagged one only when the question is scoped by tags that match its
    tags (Hindsight's rule: a question without tags loads only the global directives), or
    always with `apply_all` (Hindsight's apply_all_directives)."""
    scoped = tags_clause("tags", "$2::text[]", tags_match)
    rows = await conn.fetch(
        f"SELECT {_COLUMNS} FROM directives WHERE bank_id = $1 AND is_active"
        f" AND ($3 OR tags = '{{}}' OR (cardinality($2::text[]) > 0 AND {scoped}))"
        " ORDER BY priority DESC, created_at, id",
        bank_id,
        list(tags),
        apply_all,
    )
    return [_directive(r) for r in rows]
