"""A local batch's candidates read at once: the related observations and the peers of all its
facts in three statements at the start of the batch, instead of one to three round trips a
fact (bench/entity_skew.py's 10,000-fact journal: 4.2 round trips a fact, ~2-4 ms each under
load, were half the consolidation's wall time). When the worker's pool has a connection to
spare, every other fact's reads run on it at the same time (`BatchCandidates.read`).

What the batch itself changes is applied on top, so each fact sees what the per-fact queries
(candidates.py) would have returned at its turn:
- observations the batch wrote (created, given evidence, revised, absorbed) are read again by
  key after the fact that wrote them, and replace what was read at the start; the others
  cannot have changed (consolidation, under the bank's lock, is their only writer);
- a fact of the batch becomes a possible peer of the facts after it once it is taken (the
  per-fact path marks it consolidated then; here the marks are written together, before any
  statement that would need them and at the end);
- a fact that became evidence is no peer any more.
Each list is read with a margin over its limit; when what the batch removed leaves fewer rows
than the limit from a list that was cut at its margin, that fact's candidates are read again
by the per-fact query. So are the peers of a fact without entities, and of a fact that an
observation settled as the batch started but not at its turn (peers are only read ahead for
the others). tests/consolidation/test_batch_candidates.py checks that both ways make the
same observations.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

import asyncpg
import numpy as np
from numpy.typing import NDArray

from engine.consolidation.candidates import (
    RELATED_SCAN_MENTIONS,
    Neighbour,
    PendingFact,
    nearest_related,
    nearest_scan,
    neighbour,
    related_observations,
    vector,
)
from engine.consolidation.claims import Claim, parse_claim
from engine.consolidation.peers import PEER_NEAREST, PEER_SCAN_MENTIONS, peer_facts
from engine.consolidation.prefetch_sql import PEERS_BY_ENTITY, PEERS_NEAREST, RELATED, WRITTEN
from engine.consolidation.store import Refreshed, mark_consolidated
from engine.db import Connection, Pool, spare

# Rows read per fact beyond the limit, for what the batch removes before the fact's turn.
MARGIN = 16


@dataclass(frozen=True)
class _Written:
    """An observation the batch wrote, as it is now."""

    id: str
    text: str
    scope: frozenset[str]
    active: bool
    claim: Claim | None
    entity_ids: frozenset[str]
    event_at: datetime
    created_at: datetime
    embedding: NDArray[np.float32]


@dataclass
class _Listed:
    rows: list[Neighbour]
    full: bool  # cut at limit + MARGIN: rows beyond it were not read


def _cosine(a: NDArray[np.float32], b: NDArray[np.float32]) -> float:
    """1 - pgvector's cosine distance."""
    norms = float(np.linalg.norm(a)) * float(np.linalg.norm(b))
    return float(np.dot(a.astype(np.float64), b.astype(np.float64))) / norms if norms else 0.0


class BatchCandidates:
    """The related observations and peers of a batch's facts, taken in the batch's order."""

    def __init__(
        self,
        conn: Connection,
        bank_id: str,
        facts: Sequence[PendingFact],
        *,
        floor: float,
        related_limit: int,
        peer_limit: int,
        side: Pool | None = None,
    ) -> None:
        self._conn = conn
        self._side = side
        self._bank = bank_id
        self._floor = floor
        self._related_limit = related_limit
        self._peer_limit = peer_limit
        self._ids = [f.id for f in facts]
        self._related: dict[str, _Listed] = {}
        self._peers: dict[str, _Listed] = {}
        self._taken: set[str] = set()
        self._unmarked: list[str] = []
        self._evidence: set[str] = set()
        self._dirty: set[str] = set()
        self._written: dict[str, _Written | None] = {}

    async def read(
        self,
        facts: Sequence[PendingFact],
        claims: dict[str, Claim | None],
        unsettled: Callable[[PendingFact, list[Neighbour]], bool],
    ) -> None:
        """The related observations of the batch's facts as they are before it starts, then
        the peers of those that `unsettled` finds no related observation settles.

        With a side pool that has a connection to spare, every other fact is read on that
        connection at the same time (every other, so that the popular people's facts, whose
        scans cost most, are shared out): each fact's reads are independent of the others',
        and nothing of the batch is written yet, so the side connection sees what this
        one's transaction sees. On this 2-core machine consolidation's statements ran one at
        a time while the other core waited (bench/entity_skew.py, docs/benchmarks.md)."""
        if not facts:
            return
        async with spare(self._side) as side:
            if side is None:
                await self._read_part(self._conn, facts, claims, unsettled)
                return
            try:
                async with side.transaction(readonly=True), asyncio.TaskGroup() as both:
                    both.create_task(self._read_part(self._conn, facts[0::2], claims, unsettled))
                    both.create_task(self._read_part(side, facts[1::2], claims, unsettled))
            except ExceptionGroup as failed:
                # what failed, as one connection's reads would have raised it (the worker
                # maps errors to retryable or not by their type, activities/failures.py)
                raise failed.exceptions[0] from failed

    async def _read_part(
        self,
        conn: Connection,
        facts: Sequence[PendingFact],
        claims: dict[str, Claim | None],
        unsettled: Callable[[PendingFact, list[Neighbour]], bool],
    ) -> None:
        await self._read_related(conn, facts, claims)
        await self._read_peers(conn, [f for f in facts if unsettled(f, self.as_read(f.id))])

    async def _read_related(
        self, conn: Connection, facts: Sequence[PendingFact], claims: dict[str, Claim | None]
    ) -> None:
        """The related observations of these facts of the batch as they are before it
        starts, read on `conn`."""
        if not facts:
            return
        ids = [f.id for f in facts]
        subjects = [c.subject if (c := claims[f.id]) else None for f in facts]
        aspects = [c.aspect if (c := claims[f.id]) else None for f in facts]
        related_k = self._related_limit + MARGIN
        nearest = await nearest_related(conn, self._bank, facts, floor=self._floor)
        rows = await conn.fetch(
            RELATED,
            self._bank,
            ids,
            subjects,
            aspects,
            self._floor,
            related_k,
            RELATED_SCAN_MENTIONS,
            [fact_id for fact_id, _ in nearest],
            [observation_id for _, observation_id in nearest],
        )
        self._related.update(_lists(ids, rows, related_k, parse=False))

    def as_read(self, fact_id: str) -> list[Neighbour]:
        """`fact_id`'s related observations as the batch started."""
        listed = self._related.get(fact_id)
        return listed.rows[: self._related_limit] if listed else []

    async def _read_peers(self, conn: Connection, facts: Sequence[PendingFact]) -> None:
        """The peers of these facts of the batch as they are before it starts, read on
        `conn`."""
        if not facts:
            return
        # _FACTS needs every fact of the batch in $2 (those may count as consolidated).
        ids = self._ids
        head = (self._bank, ids, [None] * len(ids), [None] * len(ids), self._floor)
        peer_k = self._peer_limit + MARGIN
        by_entity = [f.id for f in facts if f.entity_ids and f.mentions <= PEER_SCAN_MENTIONS]
        popular = [f.id for f in facts if f.entity_ids and f.mentions > PEER_SCAN_MENTIONS]
        if by_entity:
            rows = await conn.fetch(PEERS_BY_ENTITY, *head, peer_k, by_entity)
            self._peers.update(_lists(by_entity, rows, peer_k, parse=True))
        if popular:
            nearest = max(PEER_NEAREST, peer_k)
            async with nearest_scan(conn, nearest):
                rows = await conn.fetch(PEERS_NEAREST, *head, peer_k, popular, nearest)
            self._peers.update(_lists(popular, rows, peer_k, parse=True))

    def take(self, fact: PendingFact) -> None:
        """`fact`'s turn: from now on the facts after it may meet it as a peer."""
        self._taken.add(fact.id)
        self._unmarked.append(fact.id)

    def wrote(self, observation_ids: Iterable[str]) -> None:
        self._dirty.update(observation_ids)

    def reinforced(self, observation: Neighbour, scope: Sequence[str], now: Refreshed) -> None:
        """`observation` (a related one, as read) gained evidence: its new state, without
        reading it again."""
        self._dirty.discard(observation.id)
        self._written[observation.id] = _Written(
            id=observation.id,
            text=observation.text,
            scope=frozenset(scope),
            active=True,
            claim=observation.claim,
            entity_ids=frozenset(now.entity_ids),
            event_at=now.evidence_at[-1] if now.evidence_at else observation.created_at,
            created_at=observation.created_at,
            embedding=observation.embedding,
        )

    def used(self, fact_ids: Iterable[str]) -> None:
        """These facts are evidence now: no fact meets them as a peer any more."""
        self._evidence.update(fact_ids)

    async def related(self, fact: PendingFact, claim: Claim | None) -> list[Neighbour]:
        listed = self._related.get(fact.id)
        if listed is None:
            return await self._related_by_query(fact, claim)
        await self._read_written()
        kept = [r for r in listed.rows if r.id not in self._written]
        if listed.full and len(kept) < self._related_limit:
            return await self._related_by_query(fact, claim)
        kept += [n for w in self._written.values() if (n := self._meets(w, fact, claim))]
        kept.sort(key=lambda n: (1 - n.similarity, n.id))
        return kept[: self._related_limit]

    async def peers(self, fact: PendingFact) -> list[Neighbour]:
        listed = self._peers.get(fact.id)
        if listed is None:
            return await self._peers_by_query(fact)
        batch = set(self._ids)
        kept = [
            p
            for p in listed.rows
            if p.id not in self._evidence and (p.id not in batch or p.id in self._taken)
        ]
        if listed.full and len(kept) < self._peer_limit:
            return await self._peers_by_query(fact)
        return kept[: self._peer_limit]

    async def finish(self) -> None:
        """Mark the batch's facts consolidated (those not marked yet)."""
        await self._mark()

    async def _mark(self) -> None:
        if self._unmarked:
            await mark_consolidated(self._conn, self._unmarked)
            self._unmarked = []

    async def _related_by_query(self, fact: PendingFact, claim: Claim | None) -> list[Neighbour]:
        await self._mark()
        return await related_observations(
            self._conn,
            self._bank,
            fact,
            claim,
            floor=self._floor,
            limit=self._related_limit,
        )

    async def _peers_by_query(self, fact: PendingFact) -> list[Neighbour]:
        await self._mark()
        return await peer_facts(
            self._conn, self._bank, fact, floor=self._floor, limit=self._peer_limit
        )

    async def _read_written(self) -> None:
        if not self._dirty:
            return
        dirty, self._dirty = sorted(self._dirty), set()
        rows = await self._conn.fetch(WRITTEN, dirty, self._bank)
        found = {r["id"]: r for r in rows}
        for observation_id in dirty:
            row = found.get(observation_id)
            self._written[observation_id] = (
                None
                if row is None
                else _Written(
                    id=row["id"],
                    text=row["text"],
                    scope=frozenset(row["tags"]),
                    active=row["state"] == "active",
                    claim=Claim.from_json(row["claim"]) if row["claim"] else None,
                    entity_ids=frozenset(row["entity_ids"]),
                    event_at=row["event_at"],
                    created_at=row["created_at"],
                    embedding=vector(row),
                )
            )

    def _meets(
        self, written: _Written | None, fact: PendingFact, claim: Claim | None
    ) -> Neighbour | None:
        """`written` as a related observation of `fact`, if it is one (the filter of
        candidates.py's _RELATED_OBSERVATIONS)."""
        if written is None or not written.active or written.scope != frozenset(fact.scope):
            return None
        similarity = _cosine(written.embedding, fact.embedding)
        same_claim = (
            claim is not None
            and written.claim is not None
            and (written.claim.subject, written.claim.aspect) == (claim.subject, claim.aspect)
        )
        entities = set(fact.entity_ids)
        shares = (not entities and not written.entity_ids) or bool(entities & written.entity_ids)
        if not same_claim and not (similarity >= self._floor and shares):
            return None
        return Neighbour(
            id=written.id,
            text=written.text,
            similarity=similarity,
            claim=written.claim,
            event_at=written.event_at,
            created_at=written.created_at,
            embedding=written.embedding,
        )


def _lists(
    ids: Sequence[str], rows: Sequence[asyncpg.Record], k: int, *, parse: bool
) -> dict[str, _Listed]:
    """Each fact's rows; a peer's claim is parsed once for the batch (a popular person's
    facts are peers of a dozen facts of a batch, and parsing is ~40 us)."""
    grouped: defaultdict[str, list[Neighbour]] = defaultdict(list)
    parsed: dict[str, Claim | None] = {}
    for row in rows:
        found = neighbour(row, parse=False)
        if parse and found.claim is None:
            if found.text not in parsed:
                parsed[found.text] = parse_claim(found.text)
            found = replace(found, claim=parsed[found.text])
        grouped[row["fact_id"]].append(found)
    return {i: _Listed(grouped[i], len(grouped[i]) >= k) for i in ids}
