"""The LLM request log: one row per model call (`engine.llm.LLMCall`), listed and counted
per bank."""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from engine.db import Connection, Pool
from engine.llm import LLMCall

log = logging.getLogger("engram.llm")

_INSERT = """
INSERT INTO llm_requests (id, bank_id, operation, model, status, started_at, ended_at,
                          duration_ms, input_tokens, output_tokens, total_tokens, error)
VALUES ($1, $2, $3, $4, $5, $6::timestamptz,
        $6::timestamptz + make_interval(secs => $7::integer / 1000.0), $7::integer, $8, $9, $10,
        $11)
"""


class LLMRequestLog:
    """The recorder the LLM client calls after each request (built with the process's pool)."""

    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    async def record(self, call: LLMCall) -> None:
        try:
            async with self._pool.acquire() as conn:
                await conn.execute(
                    _INSERT,
                    uuid.uuid4(),
                    call.bank_id,
                    call.operation,
                    call.model,
                    call.status,
                    call.started_at,
                    call.duration_ms,
                    call.usage.prompt_tokens,
                    call.usage.completion_tokens,
                    call.usage.total_tokens,
                    call.error,
                )
        except (asyncpg.PostgresError, OSError) as exc:
            # The call itself went through; losing its log row must not fail the work.
            log.warning("could not log an LLM call for bank %s: %s", call.bank_id, exc)


@dataclass(frozen=True)
class LLMRequestRow:
    id: str
    bank_id: str | None
    operation: str
    model: str
    status: str
    started_at: datetime
    ended_at: datetime
    duration_ms: int
    input_tokens: int
    output_tokens: int
    total_tokens: int
    error: str | None


_COLUMNS = """id::text AS id, bank_id, operation, model, status, started_at, ended_at,
duration_ms, input_tokens, output_tokens, total_tokens, error"""
_FILTER = """bank_id = $1 AND ($2::text IS NULL OR status = $2)
AND ($3::text IS NULL OR operation = $3)"""


async def list_llm_requests(
    conn: Connection,
    bank_id: str,
    status: str | None,
    operation: str | None,
    limit: int,
    offset: int,
) -> tuple[list[LLMRequestRow], int]:
    rows = await conn.fetch(
        f"SELECT {_COLUMNS} FROM llm_requests WHERE {_FILTER}"
        " ORDER BY started_at DESC, id LIMIT $4 OFFSET $5",
        bank_id,
        status,
        operation,
        limit,
        offset,
    )
    total = await conn.fetchval(
        f"SELECT count(*) FROM llm_requests WHERE {_FILTER}", bank_id, status, operation
    )
    return [LLMRequestRow(**dict(r)) for r in rows], int(total)


@dataclass(frozen=True)
class LLMStatsBucket:
    time: datetime
    statuses: dict[str, int]
    input_tokens: int
    output_tokens: int


_STATS = """
WITH buckets AS (
  SELECT generate_series(date_trunc($2, $3::timestamptz), date_trunc($2, now()),
                         ('1 ' || $2)::interval) AS time
)
SELECT b.time, r.status, count(r.id) AS n,
       coalesce(sum(r.input_tokens), 0) AS input, coalesce(sum(r.output_tokens), 0) AS output
FROM buckets b
LEFT JOIN llm_requests r
  ON r.bank_id = $1 AND date_trunc($2, r.started_at) = b.time AND r.started_at >= $3
     AND ($4::text IS NULL OR r.operation = $4)
GROUP BY b.time, r.status
ORDER BY b.time
"""


async def llm_request_stats(
    conn: Connection, bank_id: str, trunc: str, start: datetime, operation: str | None
) -> list[LLMStatsBucket]:
    buckets: dict[datetime, tuple[dict[str, int], list[int]]] = {}
    for row in await conn.fetch(_STATS, bank_id, trunc, start, operation):
        statuses, tokens = buckets.setdefault(row["time"], ({}, [0, 0]))
        if row["status"] is not None:
            statuses[row["status"]] = int(row["n"])
            tokens[0] += int(row["input"])
            tokens[1] += int(row["output"])
    return [LLMStatsBucket(t, s, tok[0], tok[1]) for t, (s, tok) in buckets.items()]
