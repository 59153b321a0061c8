"""Observations related to a fact are found through the claim and entity indexes, not by
measuring every observation of the bank: on a small bank they are exactly the ones the full
measurement finds, and the local path's variant also takes the fact off the backlog. A
popular entity's observations are looked for among the bank's nearest observations: a bounded
read that still finds the observation the fact belongs to."""

from __future__ import annotations

import httpx
import numpy as np
from consolidation_support import configure, observations, retain, wait_consolidated
from pgvector import Vector

from engine.consolidation.candidates import (
    _NEAR_OBSERVATIONS,
    _RELATED_OBSERVATIONS,
    MERGE_NEAREST,
    RELATED_SCAN_MENTIONS,
    nearest_related,
    pending_facts,
    related_observations,
)
from engine.consolidation.claims import parse_claim
from engine.consolidation.prefetch import BatchCandidates
from engine.consolidation.prefetch_sql import RELATED
from engine.consolidation.thresholds import CANDIDATE_FLOOR, PEER_FACTS, RELATED_OBSERVATIONS
from engine.db import Pool
from engine.store.banks import ensure_bank

# The search as it was: every observation of the bank, each read by key and measured.
_EVERY_OBSERVATION = """
SELECT m.id::text AS id, 1 - (m.embedding <=> $3) AS similarity
FROM observations o JOIN memory_units m ON m.id = o.observation_id
WHERE o.bank_id = $1 AND m.bank_id = $1 AND m.fact_type = 'observation' AND m.state = 'active'
  AND m.tags @> $2::text[] AND m.tags <@ $2::text[]
  AND ((o.claim->>'subject' = $4 AND o.claim->>'aspect' = $5)
       OR (1 - (m.embedding <=> $3) >= $7 AND (
           (cardinality($6::uuid[]) = 0
            AND NOT EXISTS (SELECT 1 FROM unit_entities ue WHERE ue.unit_id = m.id))
           OR EXISTS (SELECT 1 FROM unit_entities ue
                      WHERE ue.unit_id = m.id AND ue.entity_id = ANY($6::uuid[])))))
ORDER BY m.embedding <=> $3, m.id
LIMIT $8
"""

# Observations of the bank written after the statistics were taken.
OBSERVATIONS = 400


def said(speaker: str, text: str, day: int) -> dict[str, str]:
    return {"content": f"{speaker}: {text}", "timestamp": f"2024-03-{day:02d}T10:00:00Z"}


async def _marco_and_alice(api: httpx.AsyncClient, bank_id: str) -> None:
    """Observations of Marco's tennis and home and of Alice's tennis; then a new fact about
    Marco's tennis waits."""
    await retain(
        api,
        bank_id,
        [
            said("Marco", "I play tennis every weekend.", 1),
            said("Marco", "I play tennis every weekend with friends.", 2),
            said("Marco", "I live in Lisbon.", 3),
            said("Marco", "I live in Lisbon near the river.", 4),
            # Alice's observation is near Marco's tennis, but names no entity of his.
            said("Alice", "I play tennis every weekend.", 5),
            said("Alice", "I play tennis every weekend with friends.", 6),
        ],
    )
    await wait_consolidated(api, bank_id)
    assert len(await observations(api, bank_id)) >= 3
    await configure(api, bank_id, enable_observations=False)
    await retain(api, bank_id, [said("Marco", "I play tennis every weekend at the club.", 20)])


async def test_related_observations_are_those_the_full_measurement_finds(
    api: httpx.AsyncClient, pool: Pool, bank_id: str
) -> None:
    await _marco_and_alice(api, bank_id)
    async with pool.acquire() as conn, conn.transaction():
        [fact] = await pending_facts(conn, bank_id, 1, lock=False)
        claim = parse_claim(fact.text)
        expected = await conn.fetch(
            _EVERY_OBSERVATION,
            bank_id,
            fact.scope,
            Vector(fact.embedding),
            claim.subject if claim else None,
            claim.aspect if claim else None,
            fact.entity_ids,
            CANDIDATE_FLOOR,
            RELATED_OBSERVATIONS,
        )
        found = await related_observations(
            conn,
            bank_id,
            fact,
            claim,
            floor=CANDIDATE_FLOOR,
            limit=RELATED_OBSERVATIONS,
            mark=True,
        )
        marked = await conn.fetchval(
            "SELECT NOT EXISTS (SELECT 1 FROM consolidation_backlog WHERE fact_id = $1::uuid)",
            fact.id,
        )
    assert len(expected) >= 2  # Marco's tennis and Lisbon observations
    assert [(n.id, round(n.similarity, 5)) for n in found] == [
        (r["id"], round(r["similarity"], 5)) for r in expected
    ]
    assert marked


async def test_a_popular_entitys_observations_are_read_among_the_nearest(
    api: httpx.AsyncClient, pool: Pool, bank_id: str
) -> None:
    await _marco_and_alice(api, bank_id)
    async with pool.acquire() as conn, conn.transaction():
        # Marco named by more facts than his observations are read for
        await conn.execute(
            "UPDATE entities SET mention_count = $2"
            " WHERE bank_id = $1 AND canonical_name = 'Marco'",
            bank_id,
            RELATED_SCAN_MENTIONS + 1,
        )
        [fact] = await pending_facts(conn, bank_id, 1, lock=False)
        claim = parse_claim(fact.text)
        args = (fact.scope, Vector(fact.embedding), claim.subject if claim else None)
        expected = await conn.fetch(
            _EVERY_OBSERVATION,
            bank_id,
            *args,
            claim.aspect if claim else None,
            fact.entity_ids,
            CANDIDATE_FLOOR,
            RELATED_OBSERVATIONS,
        )
        found = await related_observations(
            conn, bank_id, fact, claim, floor=CANDIDATE_FLOOR, limit=RELATED_OBSERVATIONS
        )
        batch = BatchCandidates(
            conn,
            bank_id,
            [fact],
            floor=CANDIDATE_FLOOR,
            related_limit=RELATED_OBSERVATIONS,
            peer_limit=PEER_FACTS,
        )
        await batch.read([fact], {fact.id: claim}, lambda _fact, _related: False)  # no peers
        prefetched = await batch.related(fact, claim)
        # the bound: the bank's two nearest observations are Marco's tennis and Alice's
        two_nearest = await nearest_related(conn, bank_id, [fact], floor=CANDIDATE_FLOOR, nearest=2)
    assert fact.mentions > RELATED_SCAN_MENTIONS
    texts = {n.id: n.text for n in found}
    assert len(expected) >= 2 and "Lisbon" in texts[expected[1]["id"]]
    # the whole bank is among the nearest here: the same observations as measuring them all
    assert [(n.id, round(n.similarity, 5)) for n in found] == [
        (r["id"], round(r["similarity"], 5)) for r in expected
    ]
    assert [n.id for n in prefetched] == [n.id for n in found]
    tennis = found[0]
    assert "tennis" in tennis.text
    # Alice's tennis is nearer than Marco's home and names no entity of his: only the
    # observation the fact belongs to is left of the two
    assert two_nearest == [(fact.id, tennis.id)]


async def test_candidates_are_read_by_key_on_statistics_from_before_the_banks_observations(
    pool: Pool, bank_id: str
) -> None:
    """An import's closing ANALYZE sees a bank without observations. The searches that read
    their candidate observations must read each one by key, not by filtering an index scan
    over the bank's units that the statistics think holds none of them (the observations'
    scope index at 100,000 facts in bench/entity_skew.py: each candidate cost a scan of every
    observation, and consolidation fell to ~65 facts/s until autovacuum analysed the table
    again; a bank-wide index here)."""
    rng = np.random.default_rng(11)
    vectors = [Vector(v / np.linalg.norm(v)) for v in rng.normal(size=(OBSERVATIONS, 384))]
    async with pool.acquire() as conn:
        await ensure_bank(conn, bank_id)
        fact = await conn.fetchval(
            "INSERT INTO memory_units (id, bank_id, fact_type, text, embedding)"
            " VALUES (gen_random_uuid(), $1, 'world', 'a fact', $2) RETURNING id::text",
            bank_id,
            vectors[0],
        )
        await conn.execute("ANALYZE memory_units, observations")
        # In one transaction: autovacuum, analysing the table meanwhile, sees none of the
        # observations written after the statistics.
        async with conn.transaction():
            ids = await conn.fetch(
                "INSERT INTO memory_units (id, bank_id, fact_type, text, embedding)"
                " SELECT gen_random_uuid(), $1, 'observation', 'observation ' || n, v"
                " FROM unnest($2::vector[]) WITH ORDINALITY AS u(v, n) RETURNING id",
                bank_id,
                vectors,
            )
            await conn.execute(
                "INSERT INTO observations (observation_id, bank_id, origin)"
                " SELECT id, $1, 'local' FROM unnest($2::uuid[]) AS u(id)",
                bank_id,
                [r["id"] for r in ids],
            )
            nearest = [r["id"] for r in ids[:20]]
            statements = {
                "RELATED": (
                    RELATED,
                    bank_id, [fact], ["marco"], ["tennis"], 0.3, 36, RELATED_SCAN_MENTIONS,
                    [fact] * len(nearest), nearest,
                ),
                "_RELATED_OBSERVATIONS": (
                    _RELATED_OBSERVATIONS,
                    bank_id, [], vectors[0], "marco", "tennis", [], 0.3, 20,
                    RELATED_SCAN_MENTIONS, nearest,
                ),
                "_NEAR_OBSERVATIONS": (
                    _NEAR_OBSERVATIONS,
                    bank_id, [], vectors[0], nearest[0], 0.9, "marco", "tennis", 8, MERGE_NEAREST,
                ),
            }  # fmt: skip
            plans = {
                name: "\n".join(r[0] for r in await conn.fetch(f"EXPLAIN {sql}", *args))
                for name, (sql, *args) in statements.items()
            }
    for name, plan in plans.items():
        # read by key (Index Cond), never found by filtering an index scan of the bank's units
        assert "Index Cond: (id = " in plan, (name, plan)
        assert "Filter: ((id = " not in plan, (name, plan)
