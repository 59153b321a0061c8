"""A fact's context for the rerank: the facts told just before and after it in its
conversation, whichever way the conversation was sent.

A conversation retained as one document per session and the same conversation retained as
one document per message (the reference client's pattern) must give each fact the same
neighbours, or recall depends on how the memories arrived (LoCoMo recall@10 0.793 against
0.756 before this, docs/benchmarks.md). So neighbours are found on the conversation's
timeline, not inside a document:

- **The conversation** of a fact: the facts of the same bank with the same `context`, the same
  tags and the same thread (`THREAD_KEYS`: the first of these metadata keys the item has, or
  none), told within `gap` of it (`mentioned_at`, the item's timestamp). Its own document's
  chunks always belong to it.
- **The timeline**: facts ordered by (mentioned_at, document_id, chunk index). Messages sent
  with their own timestamps are ordered by them; messages that share one (LoCoMo gives only
  the session's date) are ordered by document id, so their ids must sort in message order, as
  ULIDs, UUIDv7, Slack and Discord message ids do. Inside a document, chunk order is kept.
- **The neighbours**: up to `neighbours` facts at most `positions` timeline steps away, nearest
  step first, then nearest in the text of their chunk (the fact before a fact often says what
  it answers).

Work is bounded per candidate: at most `scan` facts of other documents are read on each side
of it (unit_times' index on (bank_id, mentioned_at) finds them), so a bank whose documents
all share one timestamp costs no more than a bank of conversations.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final

import asyncpg

# Metadata keys naming the conversation an item belongs to, the first one present wins.
THREAD_KEYS: Final = (
    "thread_id",
    "thread",
    "conversation_id",
    "conversation",
    "session_id",
    "session",
)


def thread_sql(alias: str) -> str:
    """The SQL naming the thread of the fact aliased `alias` (THREAD_KEYS), or NULL."""
    return "coalesce(" + ", ".join(f"{alias}.metadata->>'{k}'" for k in THREAD_KEYS) + ")"


# What the timeline needs of a fact, read from the row the scan already filtered on (joining
# memory_units again by id cost 4 buffers a timeline fact: 3,500 of 7,400 per recall at 100k).
_COLUMNS: Final = (
    "{0}.id, {0}.updated_at, {0}.source_start, {0}.mentioned_at, near.document_id, near.chunk_index"
)

# $1 bank, $2 candidate ids, $3 neighbours per candidate, $4 timeline steps either side,
# $5 gap (interval), $6 facts scanned per side of a moment.
# The timeline is built once per distinct moment and conversation among the candidates (`g`),
# not once per candidate: LoCoMo's 80 candidates of a recall share ~15 sessions. A candidate on
# no timeline (no timestamp, or left out by the scan bound) gets its own document's chunks.
# Each side's scan is ordered by the whole timeline key and the id, so which facts the bound
# keeps among facts sharing a timestamp does not depend on the rows' physical order, and a copy
# in memory (context_memory.py) keeps the same ones; PostgreSQL reads unit_times' (bank_id,
# mentioned_at) index (migration 0044) and sorts each run of equal timestamps (an incremental
# sort). A document is its chunks' document (the fact's own `document_id` is the same, as
# retain writes both).
NEIGHBOURS_SQL: Final = f"""
WITH c AS MATERIALIZED (
    SELECT m.id, ch.document_id, ch.chunk_index, coalesce(m.source_start, 0) AS at,
           m.mentioned_at, m.context, m.tags, {thread_sql("m")} AS thread
    FROM memory_units m
    JOIN chunks ch ON ch.bank_id = m.bank_id AND ch.chunk_id = m.chunk_id
    WHERE m.bank_id = $1 AND m.id = ANY($2::uuid[])
), g AS MATERIALIZED (
    SELECT row_number() OVER () AS gid, k.*
    FROM (SELECT DISTINCT mentioned_at, context, tags, thread FROM c
          WHERE mentioned_at IS NOT NULL) k
), line AS MATERIALIZED (
    SELECT g.gid, s.id, s.updated_at, coalesce(s.source_start, 0) AS at,
           dense_rank() OVER (
               PARTITION BY g.gid ORDER BY s.mentioned_at, s.document_id, s.chunk_index
           ) AS pos
    FROM g CROSS JOIN LATERAL (
        (SELECT {_COLUMNS.format("b")} FROM unit_times tb
         JOIN memory_units b ON b.id = tb.unit_id
         JOIN chunks near ON near.bank_id = $1 AND near.chunk_id = b.chunk_id
         WHERE tb.bank_id = $1 AND tb.mentioned_at <= g.mentioned_at
           AND tb.mentioned_at >= g.mentioned_at - $5::interval
           AND b.context = g.context AND b.tags = g.tags
           AND {thread_sql("b")} IS NOT DISTINCT FROM g.thread
         ORDER BY tb.mentioned_at DESC, near.document_id DESC, near.chunk_index DESC, b.id DESC
         LIMIT $6)
        UNION ALL
        (SELECT {_COLUMNS.format("a")} FROM unit_times ta
         JOIN memory_units a ON a.id = ta.unit_id
         JOIN chunks near ON near.bank_id = $1 AND near.chunk_id = a.chunk_id
         WHERE ta.bank_id = $1 AND ta.mentioned_at > g.mentioned_at
           AND ta.mentioned_at <= g.mentioned_at + $5::interval
           AND a.context = g.context AND a.tags = g.tags
           AND {thread_sql("a")} IS NOT DISTINCT FROM g.thread
         ORDER BY ta.mentioned_at, near.document_id, near.chunk_index, a.id
         LIMIT $6)
    ) s
), placed AS MATERIALIZED (
    SELECT c.id, l.gid, l.pos
    FROM c
    JOIN g ON (g.mentioned_at, g.context, g.tags, g.thread)
              IS NOT DISTINCT FROM (c.mentioned_at, c.context, c.tags, c.thread)
    JOIN line l ON l.gid = g.gid AND l.id = c.id
)
SELECT for_id, neighbour_id, version FROM (
    SELECT c.id::text AS for_id, l.id::text AS neighbour_id, l.updated_at AS version,
           row_number() OVER (
               PARTITION BY c.id ORDER BY abs(l.pos - p.pos), abs(l.at - c.at), l.id
           ) AS k
    FROM c JOIN placed p ON p.id = c.id JOIN line l ON l.gid = p.gid
    WHERE l.id <> c.id AND abs(l.pos - p.pos) <= $4
) on_line
WHERE k <= $3
UNION ALL
SELECT c.id::text, n.id::text, n.updated_at
FROM c CROSS JOIN LATERAL (
    SELECT s.id, s.updated_at FROM chunks near
    JOIN memory_units s ON s.bank_id = $1 AND s.chunk_id = near.chunk_id
    WHERE near.bank_id = $1 AND near.document_id = c.document_id
      AND near.chunk_index BETWEEN c.chunk_index - $4 AND c.chunk_index + $4 AND s.id <> c.id
    ORDER BY abs(near.chunk_index - c.chunk_index), abs(coalesce(s.source_start, 0) - c.at), s.id
    LIMIT $3
) n
WHERE NOT EXISTS (SELECT 1 FROM placed p WHERE p.id = c.id)
"""


@dataclass(frozen=True)
class Around:
    """Each candidate's neighbours (fact ids, nearest first) and every neighbour's version
    (`updated_at`, the token-vector cache's key)."""

    neighbours: dict[str, list[str]]
    versions: dict[str, datetime]


def around_of(rows: Sequence[asyncpg.Record]) -> Around:
    """NEIGHBOURS_SQL's rows as an `Around`."""
    neighbours: dict[str, list[str]] = {}
    versions: dict[str, datetime] = {}
    for r in rows:
        neighbours.setdefault(r["for_id"], []).append(r["neighbour_id"])
        versions[r["neighbour_id"]] = r["version"]
    return Around(neighbours, versions)
