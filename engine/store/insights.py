"""What a bank holds, counted: stats by fact and link type, pending work, memories over time,
and tags with their counts."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from engine.db import Connection

Period = Literal["1h", "12h", "1d", "7d", "30d", "90d"]
# Period -> (span, bucket granularity): buckets stay between 12 and 168 per chart.
PERIODS: dict[str, tuple[timedelta, str]] = {
    "1h": (timedelta(hours=1), "minute"),
    "12h": (timedelta(hours=12), "hour"),
    "1d": (timedelta(days=1), "hour"),
    "7d": (timedelta(days=7), "hour"),
    "30d": (timedelta(days=30), "day"),
    "90d": (timedelta(days=90), "day"),
}
TIME_FIELDS = ("created_at", "mentioned_at", "occurred_start")


@dataclass(frozen=True)
class DetailedStats:
    nodes_by_fact_type: dict[str, int]
    links_by_link_type: dict[str, int]
    # "<from fact type>-><to fact type>": links between facts of those types.
    links_by_fact_type: dict[str, int]
    operations_by_status: dict[str, int]
    last_memory_write_at: datetime | None
    last_consolidated_at: datetime | None
    pending_consolidation: int


_NODES = "SELECT fact_type, count(*) AS n FROM memory_units WHERE bank_id = $1 GROUP BY 1"
_LINKS = "SELECT link_type, count(*) AS n FROM memory_links WHERE bank_id = $1 GROUP BY 1"
_LINKS_BY_FACT = """
SELECT f.fact_type || '->' || t.fact_type AS pair, count(*) AS n
FROM memory_links l
JOIN memory_units f ON f.id = l.from_unit
JOIN memory_units t ON t.id = l.to_unit
WHERE l.bank_id = $1
GROUP BY 1
"""
_OPERATIONS = "SELECT status, count(*) AS n FROM operations WHERE bank_id = $1 GROUP BY 1"
_TIMES = """
SELECT
  (SELECT max(updated_at) FROM memory_units WHERE bank_id = $1 AND fact_type <> 'observation')
    AS last_write,
  (SELECT last_consolidated_at FROM consolidation_state WHERE bank_id = $1) AS last_consolidated
"""
# Facts consolidation has not yet seen (engine/store/backlog.py).
_BACKLOG = "SELECT count(*) FROM consolidation_backlog WHERE bank_id = $1"


async def detailed_stats(conn: Connection, bank_id: str) -> DetailedStats:
    nodes = {r["fact_type"]: r["n"] for r in await conn.fetch(_NODES, bank_id)}
    links = {r["link_type"]: r["n"] for r in await conn.fetch(_LINKS, bank_id)}
    pairs = {r["pair"]: r["n"] for r in await conn.fetch(_LINKS_BY_FACT, bank_id)}
    operations = {r["status"]: r["n"] for r in await conn.fetch(_OPERATIONS, bank_id)}
    times = await conn.fetchrow(_TIMES, bank_id)
    assert times is not None
    backlog = await conn.fetchval(_BACKLOG, bank_id)
    return DetailedStats(
        nodes_by_fact_type=nodes,
        links_by_link_type=links,
        links_by_fact_type=pairs,
        operations_by_status=operations,
        last_memory_write_at=times["last_write"],
        last_consolidated_at=times["last_consolidated"],
        pending_consolidation=int(backlog or 0),
    )


@dataclass(frozen=True)
class Bucket:
    time: datetime
    counts: dict[str, int]


def _timeseries_sql(time_field: str) -> str:
    assert time_field in TIME_FIELDS  # interpolated: only known column names
    column = "created_at" if time_field == "created_at" else f"coalesce({time_field}, created_at)"
    return f"""
WITH buckets AS (
  SELECT generate_series(date_trunc($2, $3::timestamptz), date_trunc($2, $4::timestamptz),
                         ('1 ' || $2)::interval) AS time
)
SELECT b.time, m.fact_type, count(m.id) AS n
FROM buckets b
LEFT JOIN memory_units m
  ON m.bank_id = $1 AND date_trunc($2, {column}) = b.time AND {column} >= $3
GROUP BY b.time, m.fact_type
ORDER BY b.time
"""


async def memories_timeseries(
    conn: Connection, bank_id: str, period: str, time_field: str, now: datetime
) -> tuple[str, list[Bucket]]:
    """Counts per bucket and fact type over the period, every bucket present (zeros too)."""
    span, trunc = PERIODS[period]
    rows = await conn.fetch(_timeseries_sql(time_field), bank_id, trunc, now - span, now)
    buckets: dict[datetime, dict[str, int]] = {}
    for row in rows:
        counts = buckets.setdefault(row["time"], {"world": 0, "experience": 0, "observation": 0})
        if row["fact_type"] is not None:
            counts[row["fact_type"]] = int(row["n"])
    return trunc, [Bucket(time, counts) for time, counts in buckets.items()]


_TAGS = """
SELECT tag, count(*) AS n, count(*) OVER () AS total
FROM (SELECT unnest(tags) AS tag FROM {table} WHERE bank_id = $1) t
WHERE $2::text IS NULL OR tag ILIKE $2
GROUP BY tag
ORDER BY n DESC, tag
LIMIT $3 OFFSET $4
"""


def like_pattern(wildcard: str) -> str:
    """'user:*' → 'user:%' (a literal % or _ is escaped)."""
    escaped = wildcard.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped.replace("*", "%")


async def list_tags(
    conn: Connection,
    bank_id: str,
    source: Literal["memories", "mental_models"],
    pattern: str | None,
    limit: int,
    offset: int,
) -> tuple[list[tuple[str, int]], int]:
    table = "memory_units" if source == "memories" else "mental_models"
    like = like_pattern(pattern) if pattern else None
    rows = await conn.fetch(_TAGS.format(table=table), bank_id, like, limit, offset)
    total = int(rows[0]["total"]) if rows else 0
    return [(r["tag"], int(r["n"])) for r in rows], total
