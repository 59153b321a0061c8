"""The statements of a local batch's reads at once (prefetch.py): each one is the per-fact
query of candidates.py or peers.py for every fact of the batch."""

from __future__ import annotations

from engine.consolidation.candidates import by_key
from engine.store.backlog import consolidated

# The batch's facts with what their queries need; $2..$4 are parallel arrays.
_FACTS = """
f AS MATERIALIZED (
    SELECT b.id, b.subject, b.aspect, m.embedding, m.tags,
           coalesce(array(SELECT ue.entity_id FROM unit_entities ue WHERE ue.unit_id = m.id),
                    '{}') AS entities
    FROM unnest($2::uuid[], $3::text[], $4::text[]) AS b(id, subject, aspect)
    JOIN memory_units m ON m.id = b.id AND m.bank_id = $1
)"""
# candidates.py's _RELATED_OBSERVATIONS for every fact of the batch, as joins over the whole
# batch: the observations naming the batch's entities are read once (a popular person is
# named by a dozen facts of a batch, and each per-fact query read all of that person's
# mentions again), each candidate observation is read once, and the (fact, observation)
# pairs are measured and ranked together (a per-fact subquery read each pair's observation by
# key: 8,000 lookups a batch at 10,000 facts, 176 ms). A popular entity's observations are not
# read here but among the nearest (candidates.py's RELATED_SCAN_MENTIONS); observations the
# batch itself writes are applied on top whatever their distance (`_meets`): the bound is
# there to drop far ones, which the local path never relates to.
RELATED = f"""
WITH f AS MATERIALIZED (
    SELECT b.id, b.subject, b.aspect, m.embedding, m.tags,
           coalesce(array(SELECT ue.entity_id FROM unit_entities ue WHERE ue.unit_id = m.id),
                    '{{}}') AS entities,
           -- its entities whose observations are read here; the popular ones' were looked
           -- for among the nearest observations ($8, $9: candidates.py's nearest_related)
           coalesce(array(SELECT ue.entity_id FROM unit_entities ue
                          JOIN entities e ON e.id = ue.entity_id
                          WHERE ue.unit_id = m.id AND e.mention_count <= $7), '{{}}') AS common
    FROM unnest($2::uuid[], $3::text[], $4::text[]) AS b(id, subject, aspect)
    JOIN memory_units m ON m.id = b.id AND m.bank_id = $1
),
named AS MATERIALIZED (
    SELECT ue.entity_id, ue.unit_id
    FROM unit_entities ue JOIN observations o ON o.observation_id = ue.unit_id
    WHERE ue.entity_id IN (SELECT unnest(f.common) FROM f) AND o.bank_id = $1
),
pairs AS MATERIALIZED (
    SELECT p.fact_id, p.observation_id, bool_or(p.shares) AS shares
    FROM (
        SELECT f.id AS fact_id, n.unit_id AS observation_id, true AS shares
        FROM f CROSS JOIN LATERAL unnest(f.common) AS fe(entity_id)
        JOIN named n ON n.entity_id = fe.entity_id
        UNION ALL
        SELECT n.fact_id, n.observation_id, true
        FROM unnest($8::uuid[], $9::uuid[]) AS n(fact_id, observation_id)
        UNION ALL
        SELECT f.id, o.observation_id, false
        FROM f JOIN observations o
          ON o.bank_id = $1 AND o.claim->>'subject' = f.subject AND o.claim->>'aspect' = f.aspect
        UNION ALL
        SELECT f.id, o.observation_id, true
        FROM f JOIN observations o ON cardinality(f.entities) = 0 AND o.bank_id = $1
        WHERE NOT EXISTS (SELECT 1 FROM unit_entities ue WHERE ue.unit_id = o.observation_id)
    ) p
    GROUP BY p.fact_id, p.observation_id
),
seen AS MATERIALIZED (
    SELECT m.id, m.text, m.tags, m.embedding, m.created_at, o.claim, o.last_evidence_at
    FROM (SELECT DISTINCT observation_id FROM pairs) c
    JOIN observations o ON o.observation_id = c.observation_id
    CROSS JOIN LATERAL ({by_key("c.observation_id")}) m
    WHERE m.bank_id = $1 AND m.fact_type = 'observation' AND m.state = 'active'
),
measured AS (
    SELECT p.fact_id, s.id, s.embedding <=> f.embedding AS distance, p.shares,
           s.claim->>'subject' = f.subject AND s.claim->>'aspect' = f.aspect AS same_claim
    FROM pairs p
    JOIN f ON f.id = p.fact_id
    JOIN seen s ON s.id = p.observation_id
    WHERE s.tags @> f.tags AND s.tags <@ f.tags
),
ranked AS (
    SELECT m.fact_id, m.id, m.distance,
           row_number() OVER (PARTITION BY m.fact_id ORDER BY m.distance, m.id::text) AS n
    FROM measured m
    WHERE m.same_claim OR (1 - m.distance >= $5 AND m.shares)
)
SELECT r.fact_id::text AS fact_id, s.id::text AS id, s.text, 1 - r.distance AS similarity,
       s.claim, coalesce(s.last_evidence_at, s.created_at) AS event_at, s.created_at,
       s.embedding, r.distance
FROM ranked r JOIN seen s ON s.id = r.id
WHERE r.n <= $6
ORDER BY r.fact_id, r.n
"""
# A fact of the batch counts as consolidated here (it is one when the later facts meet it);
# which of them a fact may meet is decided in Python, by the order they are taken.
_PEER_FILTER = f"""m.bank_id = $1 AND m.fact_type <> 'observation'
  AND m.tags @> f.tags AND m.tags <@ f.tags
  AND m.state IN ('active', 'superseded') AND m.id <> f.id
  AND (m.id = ANY($2::uuid[]) OR {consolidated("m")})
  AND NOT EXISTS (SELECT 1 FROM observation_evidence e WHERE e.fact_id = m.id)
  AND 1 - (m.embedding <=> f.embedding) >= $5"""
_PEER_COLUMNS = """m.id::text AS id, m.text, 1 - (m.embedding <=> f.embedding) AS similarity,
           NULL::jsonb AS claim,
           coalesce(m.occurred_start, m.mentioned_at, m.created_at) AS event_at, m.created_at,
           m.embedding, m.embedding <=> f.embedding AS distance"""
# candidates.py's _PEERS_BY_ENTITY for the facts of the batch ($7: which of them).
PEERS_BY_ENTITY = f"""
WITH {_FACTS}
SELECT f.id::text AS fact_id, p.* FROM f
CROSS JOIN LATERAL (
    SELECT {_PEER_COLUMNS}
    FROM (SELECT DISTINCT ue.unit_id FROM unit_entities ue
          WHERE ue.entity_id = ANY(f.entities)
            AND NOT EXISTS (SELECT 1 FROM observation_evidence e WHERE e.fact_id = ue.unit_id)
    ) s
    CROSS JOIN LATERAL ({by_key("s.unit_id")}) m
    WHERE {_PEER_FILTER}
    ORDER BY 8, 1
    LIMIT $6
) p
WHERE f.id = ANY($7::uuid[])
"""
# candidates.py's _PEERS_NEAREST for the facts of the batch ($7: which of them; $8: how many
# of the bank's nearest facts), under its scan settings (`nearest_scan`).
PEERS_NEAREST = f"""
WITH {_FACTS}
SELECT f.id::text AS fact_id, p.* FROM f
CROSS JOIN LATERAL (
    SELECT m.id::text AS id, m.text, 1 - m.distance AS similarity, NULL::jsonb AS claim,
           m.event_at, m.created_at, m.embedding, m.distance
    FROM (
        SELECT m.id, m.text, m.tags, m.state, m.created_at, m.embedding,
               coalesce(m.occurred_start, m.mentioned_at, m.created_at) AS event_at,
               m.embedding <=> f.embedding AS distance
        FROM memory_units m
        WHERE m.bank_id = $1 AND m.fact_type <> 'observation'
        ORDER BY m.embedding <=> f.embedding
        LIMIT $8
    ) m
    WHERE m.tags @> f.tags AND m.tags <@ f.tags AND m.state IN ('active', 'superseded')
      AND (m.id = ANY($2::uuid[]) OR {consolidated("m")})
      AND m.id <> f.id AND 1 - m.distance >= $5
      AND NOT EXISTS (SELECT 1 FROM observation_evidence e WHERE e.fact_id = m.id)
      -- by the candidate's key: as a semi-join the planner read every mention of the
      -- fact's entities for each candidate (a popular person's thousands of facts:
      -- 790 ms a batch at 10,000 facts, 392,000 rows read)
      AND array(SELECT ue.entity_id FROM unit_entities ue WHERE ue.unit_id = m.id)
          && f.entities
    ORDER BY m.distance, m.id
    LIMIT $6
) p
WHERE f.id = ANY($7::uuid[])
"""
# Observations the batch wrote, as they are now (missing: removed).
WRITTEN = """
SELECT m.id::text AS id, m.text, m.tags, m.state, o.claim,
       coalesce(o.last_evidence_at, m.created_at) AS event_at, m.created_at, m.embedding,
       coalesce(array(SELECT ue.entity_id::text FROM unit_entities ue WHERE ue.unit_id = m.id),
                '{}') AS entity_ids
FROM memory_units m JOIN observations o ON o.observation_id = m.id
WHERE m.id = ANY($1::uuid[]) AND m.bank_id = $2
"""
