"""Reading stored memories (facts and observations) and entities."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

import asyncpg

from engine.db import Connection
from engine.errors import InvalidInput, NotFound
from engine.lifecycle.access_state import ACCESS_COUNT, JOIN, LAST_ACCESSED, STRENGTH, drop_access

TagsMatch = Literal["any", "all", "any_strict", "all_strict", "exact"]
TIME_FIELDS = ("created_at", "updated_at", "mentioned_at", "occurred_start", "occurred_end")


@dataclass(frozen=True)
class MemoryFilter:
    fact_type: str | None = None
    document_id: str | None = None
    entity_id: str | None = None
    text: str | None = None
    tags: list[str] = field(default_factory=list)
    tags_match: TagsMatch = "any"
    time_field: str = "created_at"
    start: datetime | None = None
    end: datetime | None = None
    state: str | None = None  # active | archived | superseded; None: any


@dataclass(frozen=True)
class Memory:
    id: str
    bank_id: str
    fact_type: str
    text: str
    context: str
    details: dict[str, Any]
    occurred_start: datetime | None
    occurred_end: datetime | None
    mentioned_at: datetime | None
    document_id: str | None
    chunk_id: str | None
    metadata: dict[str, Any]
    tags: list[str]
    proof_count: int
    created_at: datetime
    updated_at: datetime
    entities: list[str]
    # The lifecycle (engine/lifecycle/): see docs/lifecycle.md.
    importance: float = 0.5
    strength: float = 0.5
    access_count: int = 0
    last_accessed_at: datetime | None = None
    state: str = "active"
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    superseded_by: str | None = None
    needs_correction: bool = False


@dataclass(frozen=True)
class Entity:
    id: str
    canonical_name: str
    kind: str
    aliases: list[str]
    mention_count: int
    first_seen: datetime | None
    last_seen: datetime | None


@dataclass(frozen=True)
class Link:
    unit_id: str
    link_type: str
    weight: float
    text: str


def tags_clause(column: str, param: str, match: TagsMatch) -> str:
    """SQL for the tag modes: any/all keep untagged rows, *_strict drop them, exact = equal."""
    if match == "any":
        return f"(cardinality({param}) = 0 OR {column} && {param} OR cardinality({column}) = 0)"
    if match == "all":
        return f"(cardinality({param}) = 0 OR {column} @> {param} OR cardinality({column}) = 0)"
    if match == "any_strict":
        return f"(cardinality({param}) = 0 OR {column} && {param})"
    if match == "all_strict":
        return f"(cardinality({param}) = 0 OR {column} @> {param})"
    return f"(cardinality({param}) = 0 OR ({column} @> {param} AND {column} <@ {param}))"


_MEMORY_COLUMNS = f"""
m.id::text AS id, m.bank_id, m.fact_type, m.text, m.context, m.details, m.occurred_start,
m.occurred_end, m.mentioned_at, m.document_id, m.chunk_id, m.metadata, m.tags, m.proof_count,
m.created_at, m.updated_at, m.importance, {STRENGTH} AS strength,
{ACCESS_COUNT} AS access_count, {LAST_ACCESSED} AS last_accessed_at,
m.state, m.valid_from, m.valid_to, m.superseded_by::text AS superseded_by, m.needs_correction,
coalesce(array(SELECT e.canonical_name FROM unit_entities ue JOIN entities e ON e.id = ue.entity_id
               WHERE ue.unit_id = m.id ORDER BY e.canonical_name), '{{}}') AS entities
"""


def _memory(row: asyncpg.Record) -> Memory:
    return Memory(**dict(row))


async def list_memories(
    conn: Connection, bank_id: str, where: MemoryFilter, limit: int, offset: int
) -> tuple[list[Memory], int]:
    if where.time_field not in TIME_FIELDS:
        raise InvalidInput("time_field", f"must be one of {', '.join(TIME_FIELDS)}")
    axis = f"m.{where.time_field}"
    windowed = where.start is not None or where.end is not None
    conditions = [
        "m.bank_id = $1",
        "($2::text IS NULL OR m.fact_type = $2)",
        "($3::text IS NULL OR m.document_id = $3)",
        "($4::uuid IS NULL OR EXISTS (SELECT 1 FROM unit_entities ue"
        " WHERE ue.unit_id = m.id AND ue.entity_id = $4))",
        "($5::text IS NULL OR m.text ILIKE $5 OR m.context ILIKE $5)",
        tags_clause("m.tags", "$6::text[]", where.tags_match),
        f"($7::timestamptz IS NULL OR {axis} >= $7)",
        f"($8::timestamptz IS NULL OR {axis} < $8)",
        "($11::text IS NULL OR m.state = $11)",
    ]
    if windowed:
        conditions.append(f"{axis} IS NOT NULL")
    sql_where = " AND ".join(conditions)
    order = (
        f"{axis} DESC, m.id"
        if windowed
        else "m.mentioned_at DESC NULLS LAST, m.created_at DESC, m.id"
    )
    args: list[Any] = [
        bank_id,
        where.fact_type,
        where.document_id,
        where.entity_id,
        f"%{where.text}%" if where.text else None,
        where.tags,
        where.start,
        where.end,
    ]
    rows = await conn.fetch(
        f"SELECT {_MEMORY_COLUMNS} FROM memory_units m {JOIN} WHERE {sql_where}"
        f" ORDER BY {order} LIMIT $9 OFFSET $10",
        *args,
        limit,
        offset,
        where.state,
    )
    total = await conn.fetchval(
        f"SELECT count(*) FROM memory_units m WHERE {sql_where.replace('$11', '$9')}",
        *args,
        where.state,
    )
    return [_memory(r) for r in rows], int(total)


async def get_memory(conn: Connection, bank_id: str, memory_id: str) -> Memory:
    try:
        row = await conn.fetchrow(
            f"SELECT {_MEMORY_COLUMNS} FROM memory_units m {JOIN}"
            " WHERE m.bank_id = $1 AND m.id = $2",
            bank_id,
            memory_id,
        )
    except asyncpg.DataError as exc:
        raise NotFound("memory", memory_id) from exc
    if row is None:
        raise NotFound("memory", memory_id)
    return _memory(row)


async def memory_links(conn: Connection, memory_id: str, limit: int = 50) -> list[Link]:
    rows = await conn.fetch(
        "SELECT l.other::text AS unit_id, l.link_type, l.weight, m.text FROM ("
        "  SELECT to_unit AS other, link_type, weight FROM memory_links WHERE from_unit = $1"
        "  UNION ALL"
        "  SELECT from_unit, link_type, weight FROM memory_links WHERE to_unit = $1) l"
        " JOIN memory_units m ON m.id = l.other ORDER BY l.weight DESC, l.other LIMIT $2",
        memory_id,
        limit,
    )
    return [Link(**dict(r)) for r in rows]


async def clear_memories(conn: Connection, bank_id: str, fact_type: str | None) -> int:
    """Delete a bank's memories (of one type, or all with their documents); the bank stays."""
    async with conn.transaction():
        if fact_type is None:
            count = await conn.fetchval(
                "SELECT count(*) FROM memory_units WHERE bank_id = $1", bank_id
            )
            await conn.execute("DELETE FROM documents WHERE bank_id = $1", bank_id)
            await conn.execute("DELETE FROM memory_units WHERE bank_id = $1", bank_id)
            await drop_access(conn, bank_id, None)
            await conn.execute("DELETE FROM entities WHERE bank_id = $1", bank_id)
            await conn.execute("DELETE FROM staged_facts WHERE bank_id = $1", bank_id)
            return int(count)
        status = await conn.execute(
            "DELETE FROM memory_units WHERE bank_id = $1 AND fact_type = $2", bank_id, fact_type
        )
        await conn.execute(
            "DELETE FROM entities e WHERE e.bank_id = $1 AND NOT EXISTS"
            " (SELECT 1 FROM unit_entities ue WHERE ue.entity_id = e.id)",
            bank_id,
        )
        return int(status.rsplit(" ", 1)[-1])


_ENTITY_COLUMNS = (
    "id::text AS id, canonical_name, kind, aliases, mention_count, first_seen, last_seen"
)


async def list_entities(
    conn: Connection, bank_id: str, limit: int, offset: int
) -> tuple[list[Entity], int]:
    rows = await conn.fetch(
        f"SELECT {_ENTITY_COLUMNS} FROM entities WHERE bank_id = $1"
        " ORDER BY mention_count DESC, canonical_name, id LIMIT $2 OFFSET $3",
        bank_id,
        limit,
        offset,
    )
    total = await conn.fetchval("SELECT count(*) FROM entities WHERE bank_id = $1", bank_id)
    return [Entity(**dict(r)) for r in rows], int(total)


async def get_entity(conn: Connection, bank_id: str, entity_id: str) -> Entity:
    try:
        row = await conn.fetchrow(
            f"SELECT {_ENTITY_COLUMNS} FROM entities WHERE bank_id = $1 AND id = $2",
            bank_id,
            entity_id,
        )
    except asyncpg.DataError as exc:
        raise NotFound("entity", entity_id) from exc
    if row is None:
        raise NotFound("entity", entity_id)
    return Entity(**dict(row))
