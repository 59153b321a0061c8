"""The graph arm's statements: the query's named entities, and one hop from a whole frontier.

Every statement binds the request's filters as $1-$3 (engine/recall/filters.py) and returns
rows (id, source, label, kind, strength, similarity): the fact reached, the frontier fact it
was reached from (NULL for a query-named entity), what joined them ("entity:Alice",
"term:cluster", a link type), the edge kind whose weight applies, the path strength so far
and the fact's cosine similarity to the query.

The facts an entity or term leads to are ranked by distance to the query, ties by id: the same
order as the walk over the bank's graph in memory (engine/recall/graph_memory.py), and an
order the HNSW index cannot produce, so the planner never answers these few rows with an
approximate index scan that the request's filters would then thin out.

specificity(x) = ln((N + 1) / (n_x + 0.5)) / ln(N + 2) for an entity or term on n_x of the
bank's N facts: near 1 for a name on one fact, near 0 for the user's own name, so a popular
entity or a common word spreads little strength and is expanded last.
"""

from __future__ import annotations

from engine.recall.filters import ACTIVE, filter_sql
from engine.store.memories import TagsMatch

_BANK = "bank AS (SELECT coalesce((SELECT unit_count FROM bank_stats WHERE bank_id = $1), 0)"
_BANK += "::float8 AS n)"
_FRONTIER = "frontier AS (SELECT * FROM unnest($4::uuid[], $5::float8[]) AS s(id, w))"


def specificity_sql(count: str) -> str:
    """Parenthesised: `w * ln(a) / ln(b)` parses as `(w * ln(a)) / ln(b)`, whose rounding can
    differ from the walk in memory's `w * (ln(a) / ln(b))`, and two entities or terms that tie
    in one (a rare term then a common one, or the other way round) then ranked apart in the
    other."""
    return f"(ln((bank.n + 1) / ({count} + 0.5)) / ln(bank.n + 2))"


def named_sql(tags_match: TagsMatch, states: tuple[str, ...] = ACTIVE) -> str:
    """Facts mentioning an entity the query names ($4 name keys, $5 weight, $6 facts per
    entity, $7 query vector, $8 mention cap, $9 entities, $10 mentions scanned per entity).
    Each key is one probe of the (bank_id, normalized_name) index or the aliases GIN index."""
    return f"""
WITH {_BANK},
named AS (
    SELECT e.id, e.canonical_name, {specificity_sql("e.mention_count")} AS specificity
    FROM bank, entities e
    WHERE e.id IN (SELECT id FROM entities WHERE bank_id = $1
                   AND normalized_name = ANY($4::text[])
                   UNION
                   SELECT id FROM entities WHERE bank_id = $1
                   AND aliases_normalized && $4::text[])
      AND e.mention_count <= $8
    ORDER BY 3 DESC, e.id
    LIMIT $9
)
SELECT x.id::text AS id, NULL::text AS source, 'entity:' || n.canonical_name AS label,
       'entity_named' AS kind, $5::float8 * n.specificity AS strength, x.similarity
FROM named n
CROSS JOIN LATERAL (
    SELECT m.id, 1 - (m.embedding <=> $7) AS similarity
    FROM (SELECT ue.unit_id FROM unit_entities ue WHERE ue.entity_id = n.id
          ORDER BY ue.unit_id LIMIT $10) ue
    JOIN memory_units m ON m.id = ue.unit_id
    WHERE {filter_sql("m", tags_match, states)}
    ORDER BY m.embedding <=> $7, m.id
    LIMIT $6
) x
"""


def hop_sql(tags_match: TagsMatch, states: tuple[str, ...] = ACTIVE) -> str:
    """One hop from a whole frontier along the three kinds of edge, in one statement (three
    statements a hop on three connections cost three round trips and three plans for the
    same frontier). $4 frontier, $5 weights, $6 facts per fact/entity/term, $7 query vector,
    $8 facts already visited; $9 mention cap, $10 entities expanded, $11 mentions scanned per
    entity; $12 highest term document frequency, $13 terms expanded, $14 postings scanned per
    term (0 entities or terms: that kind of edge is not followed).

    - links: memory_links both ways, the `$6` heaviest per frontier fact.
    - shared entities: the frontier's `$10` entities of most weight × specificity, each
      scanning its first mentions by id (a fixed pseudo-random sample: ids are uuid5
      hashes) and keeping the `$6` most similar to the query.
    - shared terms: the same for the frontier's rarest index terms, a rare word ("cluster",
      "outage") being an entity the extractor did not name; a term on one fact only leads
      nowhere and is skipped, and so are numbers (mostly the dates the extractor writes into
      facts, "(11 June 2024)").

    A popular entity or common term spreads little strength (its specificity is low) and is
    expanded last; its scan is cut to its share, `$11 × specificity` mentions (at least
    `$6`), so the walk reads less where it gains least."""
    where = filter_sql("m", tags_match, states)
    return f"""
WITH {_FRONTIER}, {_BANK},
entity AS (
    SELECT ue.entity_id, e.canonical_name, max(s.w) AS w,
           (array_agg(s.id ORDER BY s.w DESC, s.id))[1] AS source,
           {specificity_sql("e.mention_count")} AS specificity
    FROM bank, frontier s
    JOIN unit_entities ue ON ue.unit_id = s.id
    JOIN entities e ON e.id = ue.entity_id
    WHERE e.mention_count <= $9
    GROUP BY ue.entity_id, e.canonical_name, e.mention_count, bank.n
    ORDER BY max(s.w) * {specificity_sql("e.mention_count")} DESC, ue.entity_id
    LIMIT $10
),
term AS (
    SELECT t.term, max(s.w) AS w, (array_agg(s.id ORDER BY s.w DESC, s.id))[1] AS source,
           {specificity_sql("st.df")} AS specificity
    FROM bank, frontier s
    JOIN memory_terms t ON t.unit_id = s.id
    JOIN bank_term_stats st ON st.bank_id = $1 AND st.term = t.term
    WHERE st.df BETWEEN 2 AND $12 AND t.term !~ '^[0-9]+$'
    GROUP BY t.term, st.df, bank.n
    ORDER BY max(s.w) * {specificity_sql("st.df")} DESC, t.term
    LIMIT $13
)
SELECT m.id::text AS id, s.id::text AS source, l.link_type AS label, l.link_type AS kind,
       s.w * l.weight AS strength, 1 - (m.embedding <=> $7) AS similarity
FROM frontier s
CROSS JOIN LATERAL (
    SELECT other, link_type, weight FROM (
        SELECT to_unit AS other, link_type, weight FROM memory_links WHERE from_unit = s.id
        UNION ALL
        SELECT from_unit, link_type, weight FROM memory_links WHERE to_unit = s.id
    ) x ORDER BY weight DESC, other LIMIT $6
) l
JOIN memory_units m ON m.id = l.other
WHERE {where} AND m.id <> ALL($8::uuid[])
UNION ALL
SELECT x.id::text, sh.source::text, 'entity:' || sh.canonical_name, 'entity_shared',
       sh.w * sh.specificity, x.similarity
FROM entity sh
CROSS JOIN LATERAL (
    SELECT m.id, 1 - (m.embedding <=> $7) AS similarity
    FROM (SELECT ue.unit_id FROM unit_entities ue
          WHERE ue.entity_id = sh.entity_id AND ue.unit_id <> ALL($8::uuid[])
          ORDER BY ue.unit_id LIMIT greatest($6, ceil($11 * sh.specificity)::int)) ue
    JOIN memory_units m ON m.id = ue.unit_id
    WHERE {where}
    ORDER BY m.embedding <=> $7, m.id
    LIMIT $6
) x
UNION ALL
SELECT x.id::text, sh.source::text, 'term:' || sh.term, 'term_shared',
       sh.w * sh.specificity, x.similarity
FROM term sh
CROSS JOIN LATERAL (
    SELECT m.id, 1 - (m.embedding <=> $7) AS similarity
    FROM (SELECT t.unit_id FROM memory_terms t
          WHERE t.bank_id = $1 AND t.term = sh.term AND t.unit_id <> ALL($8::uuid[])
          ORDER BY t.unit_id LIMIT greatest($6, ceil($14 * sh.specificity)::int)) t
    JOIN memory_units m ON m.id = t.unit_id
    WHERE {where}
    ORDER BY m.embedding <=> $7, m.id
    LIMIT $6
) x
"""
