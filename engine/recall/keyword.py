"""Keyword arm: true BM25 computed in PostgreSQL from the statistics retain keeps.

The formula is `engine.bm25.score` (tested equal to it): per distinct query term,
    idf(t) = ln(1 + (N − df + 0.5) / (df + 0.5))
    tf'    = tf·(k1 + 1) / (tf + k1·(1 − b + b·|d| / avgdl))
with N = bank_stats.unit_count, avgdl = total_terms / N, df from bank_term_stats, tf from
memory_terms and |d| = memory_units.token_count. Query terms come from `engine.text.tokenize`,
the tokenizer retain indexed with (stemmed English, CJK bigrams), so a Chinese query matches
Chinese facts.
"""

from __future__ import annotations

import time

from engine.bm25 import BM25Params
from engine.db import Connection
from engine.recall.filters import filter_args, filter_sql
from engine.recall.types import ArmHit, ArmResult, RecallRequest
from engine.store.memories import TagsMatch


def keyword_sql(tags_match: TagsMatch) -> str:
    return f"""
WITH stats AS (
    SELECT unit_count::float8 AS n,
           CASE WHEN unit_count > 0 THEN total_terms::float8 / unit_count ELSE 0 END AS avgdl
    FROM bank_stats WHERE bank_id = $1
), q AS (
    SELECT t.term, ln(1 + (s.n - t.df + 0.5) / (t.df + 0.5)) AS idf, s.avgdl
    FROM bank_term_stats t CROSS JOIN stats s
    WHERE t.bank_id = $1 AND t.term = ANY($4::text[]) AND t.df > 0
)
SELECT m.id::text AS id,
       sum(q.idf * mt.tf * ($5::float8 + 1)
           / (mt.tf + $5::float8 * (1 - $6::float8 + $6::float8
                                    * CASE WHEN q.avgdl > 0 THEN m.token_count / q.avgdl
                                           ELSE 1 END)))
           AS score
FROM q
JOIN memory_terms mt ON mt.bank_id = $1 AND mt.term = q.term
JOIN memory_units m ON m.id = mt.unit_id
WHERE {filter_sql("m", tags_match)}
GROUP BY m.id
ORDER BY score DESC, m.id
LIMIT $7
"""


async def keyword_arm(
    conn: Connection,
    request: RecallRequest,
    terms: list[str],
    *,
    limit: int,
    params: BM25Params,
) -> ArmResult:
    started = time.perf_counter()
    distinct = list(dict.fromkeys(terms))
    if not distinct:
        return ArmResult("keyword", [], 0.0, "no index terms in the query")
    rows = await conn.fetch(
        keyword_sql(request.tags_match),
        *filter_args(request),
        distinct,
        params.k1,
        params.b,
        limit,
    )
    hits = [ArmHit(r["id"], float(r["score"])) for r in rows]
    return ArmResult("keyword", hits, (time.perf_counter() - started) * 1000)
