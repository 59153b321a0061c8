"""Observations related to a fact are found through the claim and entity indexes, not by
measuring every observation of the bank: on a small bank they are exactly the ones the full
measurement finds, and the local path's variant also takes the fact off the backlog. A
popular entity's observations are looked for among the bank's nearest observations: a bounded
read that still finds the observation the fact belongs to."""

from __future__ import annotations

import httpx
from consolidation_support import configure, observations, retain, wait_consolidated
from pgvector import Vector

from engine.consolidation.candidates import (
    RELATED_SCAN_MENTIONS,
    nearest_related,
    pending_facts,
    related_observations,
)
from engine.consolidation.claims import parse_claim
from engine.consolidation.prefetch import BatchCandidates
from engine.consolidation.thresholds import CANDIDATE_FLOOR, PEER_FACTS, RELATED_OBSERVATIONS
from engine.db import Pool

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
