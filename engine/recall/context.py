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
of it (the index on (bank_id, mentioned_at) finds them), so a bank whose documents all share
one timestamp costs no more than a bank of conversations.
"""

from __future__ import annotations

from typing import Final

# Metadata keys naming the conversation an item belongs to, the first one present wins.
THREAD_KEYS: Final = (
    "thread_id",
    "thread",
    "conversation_id",
    "conversation",
    "session_id",
    "session",
)


def _thread(alias: str) -> str:
    return "coalesce(" + ", ".join(f"{alias}.metadata->>'{k}'" for k in THREAD_KEYS) + ")"


# $1 bank, $2 candidate ids, $3 neighbours per candidate, $4 timeline steps either side,
# $5 gap (interval), $6 facts of other documents scanned per side.
NEIGHBOURS_SQL: Final = f"""
WITH c AS MATERIALIZED (
    SELECT m.id, m.document_id, ch.chunk_index, coalesce(m.source_start, 0) AS at,
           m.mentioned_at, m.context, m.tags, {_thread("m")} AS thread
    FROM memory_units m
    JOIN chunks ch ON ch.bank_id = m.bank_id AND ch.chunk_id = m.chunk_id
    WHERE m.bank_id = $1 AND m.id = ANY($2::uuid[])
)
SELECT c.id::text AS for_id, n.id::text AS neighbour_id, n.updated_at AS version
FROM c CROSS JOIN LATERAL (
    SELECT placed.id, placed.updated_at FROM (
        SELECT line.*, max(CASE WHEN line.id = c.id THEN line.pos END) OVER () AS own
        FROM (
            SELECT s.id, s.updated_at, coalesce(s.source_start, 0) AS at,
                   dense_rank() OVER (
                       ORDER BY s.mentioned_at, s.document_id, near.chunk_index
                   ) AS pos
            FROM (
                SELECT d.id FROM chunks dc
                JOIN memory_units d ON d.bank_id = $1 AND d.chunk_id = dc.chunk_id
                WHERE dc.bank_id = $1 AND dc.document_id = c.document_id
                  AND dc.chunk_index BETWEEN c.chunk_index - $4 AND c.chunk_index + $4
                UNION ALL
                (SELECT b.id FROM memory_units b
                 WHERE b.bank_id = $1 AND b.mentioned_at <= c.mentioned_at
                   AND b.mentioned_at >= c.mentioned_at - $5::interval
                   AND b.document_id <> c.document_id AND b.chunk_id IS NOT NULL
                   AND b.context = c.context AND b.tags = c.tags
                   AND {_thread("b")} IS NOT DISTINCT FROM c.thread
                 ORDER BY b.mentioned_at DESC LIMIT $6)
                UNION ALL
                (SELECT a.id FROM memory_units a
                 WHERE a.bank_id = $1 AND a.mentioned_at > c.mentioned_at
                   AND a.mentioned_at <= c.mentioned_at + $5::interval
                   AND a.document_id <> c.document_id AND a.chunk_id IS NOT NULL
                   AND a.context = c.context AND a.tags = c.tags
                   AND {_thread("a")} IS NOT DISTINCT FROM c.thread
                 ORDER BY a.mentioned_at LIMIT $6)
            ) found
            JOIN memory_units s ON s.id = found.id
            JOIN chunks near ON near.bank_id = $1 AND near.chunk_id = s.chunk_id
        ) line
    ) placed
    WHERE placed.id <> c.id AND abs(placed.pos - placed.own) <= $4
    ORDER BY abs(placed.pos - placed.own), abs(placed.at - c.at), placed.id
    LIMIT $3
) n
"""
