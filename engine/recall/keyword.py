"""Keyword arm: true BM25 computed in PostgreSQL from the statistics retain keeps.

The formula is `engine.bm25.score` (tested equal to it): per distinct query term,
    idf(t) = ln(1 + (N − df + 0.5) / (df + 0.5))
    tf'    = tf·(k1 + 1) / (tf + k1·(1 − b + b·|d| / avgdl))
with N = bank_stats.unit_count, avgdl = total_terms / N, df from bank_term_stats, tf from
memory_terms and |d| = memory_units.token_count. Query terms come from `engine.text.tokenize`,
the tokenizer retain indexed with (stemmed English, CJK bigrams), so a Chinese query matches
Chinese facts.

Large banks. Summing every posting of every query term costs one heap read of memory_terms
and one of memory_units per posting: at 100k facts a question such as "What did Nina Dubois
do in Zurich in June 2023?" touches ~20k postings ("2023", "june", first and last names
are each in thousands of facts) and the arm took 100+ ms. When the query's postings exceed
EXACT_POSTINGS, the arm screens, then scores exactly:
  1. candidates come from the postings of the query's rarest terms (ascending df, as many
     as fit in SCREEN_POSTINGS, at least one), ranked by their BM25 part with |d| = avgdl
     (no memory_units read); the best SCREEN_FACTOR × limit go on;
  2. those candidates get the exact BM25 score above over ALL query terms (the common
     terms' tf read by primary key), and the best `limit` are returned.
Every returned score is the true BM25 score; what can be missed is a fact matching only
the common terms (each of which has a low idf by definition) or one the length-free screen
ranked below SCREEN_FACTOR × limit. Below EXACT_POSTINGS (nearly every LoCoMo question: banks
of ~1,500 facts) the plain statement runs.
Measured on the synthetic bank of bench/recall_latency.py at ~50k facts (30 questions, 25
screened; loaded machine), against the plain statement (median 141-232 ms, p95 0.5-0.65 s):
    screen postings  4,000: median 25 ms, p95 77 ms, top-10 overlap 0.82, top-60 0.70
                     8,000: median 30 ms, p95 64 ms, top-10 overlap 0.86, top-60 0.81
                    12,000: median 35 ms, p95 101 ms, top-10 overlap 0.96, top-60 0.93
(at ~13k facts, 4,000: top-10 0.99). The misses are facts matching many common terms and
few rare ones; a score-bounded (MaxScore) screen or a covering index with tf would remove
the trade-off.
"""

from __future__ import annotations

import time

from engine.bm25 import BM25Params
from engine.db import Connection
from engine.recall.filters import ACTIVE, filter_args, filter_sql, visible_states
from engine.recall.types import FACT_TYPES, ArmHit, ArmResult, RecallRequest
from engine.store.memories import TagsMatch

EXACT_POSTINGS = 5000  # Σ df of the query terms up to which every posting is scored
SCREEN_POSTINGS = 12000  # postings the screen may read
SCREEN_FACTOR = 4  # candidates kept by the screen, per result asked for

_TERM_DF = """
SELECT term, df FROM bank_term_stats WHERE bank_id = $1 AND term = ANY($2::text[]) AND df > 0
"""


# The query's terms with their idf and the bank's average length, shared by both statements
# ($1 bank, $4 the query's distinct terms).
_QUERY_TERMS = """WITH stats AS (
    SELECT unit_count::float8 AS n,
           CASE WHEN unit_count > 0 THEN total_terms::float8 / unit_count ELSE 0 END AS avgdl
    FROM bank_stats WHERE bank_id = $1
), q AS (
    SELECT t.term, ln(1 + (s.n - t.df + 0.5) / (t.df + 0.5)) AS idf, s.avgdl
    FROM bank_term_stats t CROSS JOIN stats s
    WHERE t.bank_id = $1 AND t.term = ANY($4::text[]) AND t.df > 0
)"""


def keyword_sql(tags_match: TagsMatch, states: tuple[str, ...] = ACTIVE) -> str:
    return f"""
{_QUERY_TERMS}
SELECT m.id::text AS id,
       sum(q.idf * mt.tf * ($5::float8 + 1)
           / (mt.tf + $5::float8 * (1 - $6::float8 + $6::float8
                                    * CASE WHEN q.avgdl > 0 THEN m.token_count / q.avgdl
                                           ELSE 1 END)))
           AS score
FROM q
JOIN memory_terms mt ON mt.bank_id = $1 AND mt.term = q.term
JOIN memory_units m ON m.id = mt.unit_id
WHERE {filter_sql("m", tags_match, states)}
GROUP BY m.id
ORDER BY score DESC, m.id
LIMIT $7
"""


def screened_sql(tags_match: TagsMatch, filtered: bool, states: tuple[str, ...] = ACTIVE) -> str:
    """$4 all query terms, $5 k1, $6 b, $7 limit, $8 screening terms, $9 screen size. With
    `filtered`, the screen also applies the request's filters (one memory_units read per
    screened posting); without, it reads memory_terms alone. Lifecycle states are applied
    after the screen only: inactive facts are few, and reading memory_units per posting to
    drop them would cost what the screen saves."""
    screen_filter = (
        f"JOIN memory_units f ON f.id = mt.unit_id WHERE {filter_sql('f', tags_match, states)}"
        if filtered
        else ""
    )
    return f"""
{_QUERY_TERMS}, screen AS (
    SELECT mt.unit_id
    FROM q JOIN memory_terms mt ON mt.bank_id = $1 AND mt.term = q.term
    {screen_filter}
    {"AND" if filtered else "WHERE"} q.term = ANY($8::text[])
    GROUP BY mt.unit_id
    ORDER BY sum(q.idf * mt.tf * ($5::float8 + 1) / (mt.tf + $5::float8)) DESC, mt.unit_id
    LIMIT $9
)
SELECT m.id::text AS id, s.score
FROM screen c
JOIN memory_units m ON m.id = c.unit_id
CROSS JOIN LATERAL (
    SELECT sum(q.idf * mt.tf * ($5::float8 + 1)
               / (mt.tf + $5::float8 * (1 - $6::float8 + $6::float8
                                        * CASE WHEN q.avgdl > 0 THEN m.token_count / q.avgdl
                                               ELSE 1 END))) AS score
    FROM q JOIN memory_terms mt ON mt.bank_id = $1 AND mt.term = q.term AND mt.unit_id = c.unit_id
) s
WHERE {filter_sql("m", tags_match, states)}
ORDER BY s.score DESC, m.id
LIMIT $7
"""


def screening_terms(df: dict[str, int]) -> list[str]:
    """The rarest terms whose postings fit in SCREEN_POSTINGS (at least the rarest one)."""
    chosen: list[str] = []
    total = 0
    for term, count in sorted(df.items(), key=lambda item: (item[1], item[0])):
        if chosen and total + count > SCREEN_POSTINGS:
            break
        chosen.append(term)
        total += count
    return chosen


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
    df = {r["term"]: int(r["df"]) for r in await conn.fetch(_TERM_DF, request.bank_id, distinct)}
    args = (*filter_args(request), distinct, params.k1, params.b, limit)
    note = ""
    if sum(df.values()) <= EXACT_POSTINGS:
        rows = await conn.fetch(keyword_sql(request.tags_match, visible_states(request)), *args)
    else:
        screen = screening_terms(df)
        filtered = bool(request.tags) or not set(FACT_TYPES) <= set(request.types or FACT_TYPES)
        rows = await conn.fetch(
            screened_sql(request.tags_match, filtered, visible_states(request)),
            *args,
            screen,
            SCREEN_FACTOR * limit,
        )
        read = sum(df[t] for t in screen)
        note = f"screened by {', '.join(screen)} ({read} of {sum(df.values())} postings)"
    hits = [ArmHit(r["id"], float(r["score"])) for r in rows]
    return ArmResult("keyword", hits, (time.perf_counter() - started) * 1000, note)
