"""The local consolidation path: no LLM, deterministic, one fact at a time in event order.

For each fact, within its scope (bank + exact tag set):
1. Observations about the same subject and aspect (claims.py), or sharing an entity with it,
   are related to it. One it contradicts is revised: the new text states the new belief and
   what no longer holds, the old text goes to the history with the reason, the old evidence
   becomes superseded (an older fact that contradicts a newer belief is only recorded as
   contradicting evidence). Others it contradicts are absorbed into the revised one.
2. Otherwise the nearest observation it supports gains it as evidence (proof count, freshness)
   instead of a near-duplicate being written.
3. Otherwise older facts that no observation uses yet are searched: with supporting ones it
   forms a new observation (a cluster with a representative statement, the medoid); a
   contradicting one makes an observation of the change, with the older belief as version 1.
4. A fact alone waits for a second one. Hindsight makes every fact an observation, and users
   measured two thirds of those resting on one fact, nearly all restating it
   (vectorize-io/hindsight#6425): that doubles recall's index without adding knowledge.
Every new or revised observation then goes through the near-duplicate merge (merge.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np
from numpy.typing import NDArray

from engine.consolidation.candidates import Neighbour, PendingFact
from engine.consolidation.claims import Claim, parse_claim, timeless
from engine.consolidation.encode import EncodedText, TextEncoder
from engine.consolidation.merge import Current, merge_near_duplicates
from engine.consolidation.payloads import ConsolidationCounts
from engine.consolidation.prefetch import BatchCandidates
from engine.consolidation.relations import Relation, merged_claim, relate, revised_statement
from engine.consolidation.store import (
    Evidence,
    Origin,
    PriorVersion,
    Trends,
    absorb_observation,
    add_evidence,
    insert_observation,
    refresh_observation,
    reinforce_observation,
    rewrite_observation,
    supersede_evidence,
)
from engine.consolidation.thresholds import (
    CANDIDATE_FLOOR,
    JOIN_SIMILARITY,
    PEER_FACTS,
    RELATED_OBSERVATIONS,
)
from engine.db import Connection, Pool


@dataclass
class Tally:
    """What one batch did, counted as it goes."""

    created: int = 0
    reinforced: int = 0
    updated: int = 0
    merged: int = 0
    retracted: int = 0
    rejected: int = 0

    def counts(self, facts: int) -> ConsolidationCounts:
        return ConsolidationCounts(
            facts,
            self.created,
            self.reinforced,
            self.updated,
            self.merged,
            self.retracted,
            self.rejected,
        )


@dataclass(frozen=True)
class _Member:
    id: str
    text: str
    embedding: NDArray[np.float32]
    event_at: datetime
    created_at: datetime


def _member(item: PendingFact | Neighbour) -> _Member:
    return _Member(item.id, item.text, item.embedding, item.event_at, item.created_at)


# Similarity totals this close count as a tie (the shortest, then the oldest statement wins):
# with two members both totals are the same cosine, and only float rounding told them apart.
_MEDOID_TIE = 1e-4


def representative(members: Sequence[_Member]) -> _Member:
    """The medoid: most similar to the others in total; then the shortest, then the oldest."""
    matrix = np.stack([m.embedding for m in members])
    totals = (matrix @ matrix.T).sum(axis=1) - np.einsum("ij,ij->i", matrix, matrix)
    best = float(totals.max())
    tied = [i for i in range(len(members)) if float(totals[i]) >= best - _MEDOID_TIE]
    return members[min(tied, key=lambda i: (len(members[i].text), members[i].created_at))]


def _judged(
    fact: PendingFact, claim: Claim | None, related: Sequence[Neighbour]
) -> tuple[list[tuple[Neighbour, Relation]], Neighbour | None]:
    """The related observations `fact` contradicts, and the nearest one it supports."""
    contradicted: list[tuple[Neighbour, Relation]] = []
    supported: Neighbour | None = None
    for observation in related:
        relation = relate(
            observation.claim,
            observation.text,
            claim,
            fact.text,
            observation.similarity,
            JOIN_SIMILARITY,
        )
        if relation.kind == "contradicts":
            contradicted.append((observation, relation))
        elif relation.kind == "supports" and supported is None:
            supported = observation
    return contradicted, supported


class LocalConsolidator:
    def __init__(
        self,
        conn: Connection,
        bank_id: str,
        encoder: TextEncoder,
        as_of: datetime,
        tally: Tally | None = None,
        origin: Origin = "local",
        *,
        prefetch: bool = True,
        side: Pool | None = None,
    ) -> None:
        self._conn = conn
        self._side = side
        self._bank = bank_id
        self._encode = encoder
        self._as_of = as_of
        self.tally = tally or Tally()
        self._origin: Origin = origin
        self._prefetch = prefetch
        self._trends = Trends()
        self._candidates = BatchCandidates(
            conn,
            bank_id,
            [],
            floor=CANDIDATE_FLOOR,
            related_limit=RELATED_OBSERVATIONS,
            peer_limit=PEER_FACTS,
        )

    async def consolidate(self, facts: Sequence[PendingFact]) -> Tally:
        """Consolidate `facts` in the order they happened, each taken in turn (so the next
        ones meet it as a peer); all marked consolidated when done. Their candidates are read
        for the whole batch at once (prefetch.py; half of them on a connection of `side` when
        it has one to spare) unless `prefetch` is off (then one fact at a time, as the
        per-fact queries return them)."""
        ordered = sorted(facts, key=lambda f: (f.event_at, f.created_at, f.id))
        claims = {f.id: parse_claim(f.text) for f in ordered}
        self._candidates = BatchCandidates(
            self._conn,
            self._bank,
            ordered,
            floor=CANDIDATE_FLOOR,
            related_limit=RELATED_OBSERVATIONS,
            peer_limit=PEER_FACTS,
            side=self._side,
        )
        if self._prefetch:
            # Peers are read for the facts that no observation settles as the batch starts;
            # the batch may settle more of them (then their peers go unused) or fewer (then
            # theirs are read at their turn, by the per-fact query).
            await self._candidates.read(
                ordered,
                claims,
                lambda fact, related: _judged(fact, claims[fact.id], related) == ([], None),
            )
        for fact in ordered:
            self._candidates.take(fact)
            await self._consolidate_one(fact, claims[fact.id])
        await self._candidates.finish()
        await self._trends.write(self._conn)
        return self.tally

    async def _add_evidence(self, observation_id: str, evidence: Sequence[Evidence]) -> None:
        await add_evidence(self._conn, self._bank, observation_id, evidence)
        self._candidates.used(e.fact_id for e in evidence)
        self._candidates.wrote([observation_id])

    async def _consolidate_one(self, fact: PendingFact, claim: Claim | None) -> None:
        related = await self._candidates.related(fact, claim)
        contradicted, supported = _judged(fact, claim, related)
        if contradicted:
            await self._revise(fact, claim, contradicted)
        elif supported is not None:
            refreshed = await reinforce_observation(
                self._conn,
                self._bank,
                supported.id,
                [Evidence(fact.id, fact.text)],
                self._as_of,
                trends=self._trends,
            )
            self._candidates.used([fact.id])
            self._candidates.reinforced(supported, fact.scope, refreshed)
            self.tally.reinforced += 1
        else:
            await self._from_peers(fact, claim)

    async def _revise(
        self,
        fact: PendingFact,
        claim: Claim | None,
        contradicted: list[tuple[Neighbour, Relation]],
    ) -> None:
        target, relation = contradicted[0]
        if fact.event_at < target.event_at:
            # Older than the belief it disputes: recorded, the newer belief stands.
            evidence = Evidence(fact.id, fact.text, "contradicts")
            await self._add_evidence(target.id, [evidence])
            return
        text = revised_statement(target.text, fact.text, target.claim, claim)
        encoded = (await self._encode([text]))[0]
        revised = merged_claim(target.claim, claim)
        await supersede_evidence(self._conn, target.id)
        await self._add_evidence(target.id, [Evidence(fact.id, fact.text)])
        await rewrite_observation(
            self._conn,
            self._bank,
            target.id,
            text=text,
            encoded=encoded,
            claim=revised,
            reason=f"contradicted by a newer fact ({relation.reason})",
            fact_ids=[fact.id],
        )
        await refresh_observation(
            self._conn, self._bank, target.id, self._as_of, trends=self._trends
        )
        self.tally.updated += 1
        for other, other_relation in contradicted[1:]:
            if other.event_at <= fact.event_at:
                await absorb_observation(
                    self._conn,
                    self._bank,
                    target.id,
                    other.id,
                    reason=f"contradicted by a newer fact ({other_relation.reason})",
                    stance="superseded",
                    as_of=self._as_of,
                    trends=self._trends,
                )
                self._candidates.wrote([other.id])
                self.tally.merged += 1
        await self._merge(
            Current(
                target.id,
                text,
                fact.scope,
                encoded.embedding,
                revised,
                max(target.event_at, fact.event_at),
                target.created_at,
            )
        )

    async def _from_peers(self, fact: PendingFact, claim: Claim | None) -> None:
        peers = await self._candidates.peers(fact)
        contradiction: tuple[Neighbour, Relation] | None = None
        supporters: list[Neighbour] = []
        for peer in peers:
            relation = relate(
                peer.claim, peer.text, claim, fact.text, peer.similarity, JOIN_SIMILARITY
            )
            if relation.kind == "contradicts" and contradiction is None:
                contradiction = (peer, relation)
            elif relation.kind == "supports":
                supporters.append(peer)
        if contradiction is not None:
            await self._create_changed(fact, claim, *contradiction)
        elif supporters:
            await self._create_cluster(fact, claim, supporters)

    async def _create_changed(
        self, fact: PendingFact, claim: Claim | None, peer: Neighbour, relation: Relation
    ) -> None:
        """An observation of a change of belief: the older statement is its version 1."""
        if (peer.event_at, peer.created_at) <= (fact.event_at, fact.created_at):
            old, old_claim, new, new_claim = _member(peer), peer.claim, _member(fact), claim
        else:
            old, old_claim, new, new_claim = _member(fact), claim, _member(peer), peer.claim
        text = revised_statement(old.text, new.text, old_claim, new_claim)
        encoded = (await self._encode([text]))[0]
        revised = merged_claim(old_claim, new_claim)
        evidence = [Evidence(old.id, old.text, "superseded"), Evidence(new.id, new.text)]
        observation_id = await insert_observation(
            self._conn,
            self._bank,
            text=text,
            scope=fact.scope,
            encoded=encoded,
            claim=revised,
            origin=self._origin,
            evidence=evidence,
            as_of=self._as_of,
            trends=self._trends,
            prior=PriorVersion(
                timeless(old.text),
                f"contradicted by a newer fact ({relation.reason})",
                [new.id],
            ),
        )
        self._candidates.used(e.fact_id for e in evidence)
        self.tally.created += 1
        await self._merge(
            Current(
                observation_id,
                text,
                fact.scope,
                encoded.embedding,
                revised,
                new.event_at,
                datetime.now(UTC),
            )
        )

    async def _create_cluster(
        self, fact: PendingFact, claim: Claim | None, supporters: Sequence[Neighbour]
    ) -> None:
        members = [_member(fact), *(_member(s) for s in supporters)]
        chosen = representative(members)
        text = timeless(chosen.text)
        reused: str | None = None  # the fact whose stored token vectors it takes
        if text == chosen.text:
            encoded, reused = EncodedText(chosen.embedding, None), chosen.id
        else:
            encoded = (await self._encode([text]))[0]
        statement_claim = parse_claim(text) or claim
        evidence = [Evidence(m.id, m.text) for m in members]
        observation_id = await insert_observation(
            self._conn,
            self._bank,
            text=text,
            scope=fact.scope,
            encoded=encoded,
            claim=statement_claim,
            origin=self._origin,
            evidence=evidence,
            as_of=self._as_of,
            tokens_of=reused,
            trends=self._trends,
        )
        self._candidates.used(e.fact_id for e in evidence)
        self.tally.created += 1
        await self._merge(
            Current(
                observation_id,
                text,
                fact.scope,
                encoded.embedding,
                statement_claim,
                max(m.event_at for m in members),
                datetime.now(UTC),
            )
        )

    async def _merge(self, current: Current) -> None:
        kept, absorbed = await merge_near_duplicates(
            self._conn, self._bank, current, self._as_of, trends=self._trends
        )
        self._candidates.wrote([current.id, kept, *absorbed])
        self.tally.merged += len(absorbed)
