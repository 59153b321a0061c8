"""Step 4: resolve the staged facts' entity mentions to the bank's canonical entities.

Cost per batch does not grow with how popular an entity is or how many batches are in flight
(issue 17: a Zipf-like journal spent 2.5 s a document here, 90% of the import, most of it
waiting on per-name advisory locks while the evidence of popular entities was gathered):

- Every distinct name of the batch is looked up in one statement by its normalised key (the
  unique index). A name that is an entity's canonical name resolves to it with no further
  work: tier 0 of engine.entities wins whatever the other candidates are.
- Only the other names (new ones, nicknames, typos) fetch candidates (exact, alias and
  trigram neighbours, in one statement for all of them) and then co-occurrence evidence
  for their candidates, in bounded work: whether a candidate has appeared with each entity
  already resolved for the same fact is one EXISTS walked from the less mentioned side, and
  the rest of its co-occurring set (used only for ranking) is read from at most
  COOCCURRENCE_SAMPLE of its mentions.
- No locks are held while deciding. New entities are created at the end in one
  `INSERT ... ON CONFLICT DO NOTHING` in key order (two batches creating the same names
  wait on each other's rows in the same order, so they queue instead of deadlocking), under
  the deterministic id of their key, so two documents naming a new entity at once create
  one. Aliases are added after that, in entity-id order (the order upsert locks entity rows).

Two concurrent batches see the same stored entities, so without the old locks one may
create a name the other, with more evidence, merges into an existing entity as an alias:
the name's facts are then split between two entities (recall still finds them), never
merged wrongly. Inside a batch, mentions are decided in fact order and see the entities and
aliases the batch's earlier mentions created, as before.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

import asyncpg

from engine.db import Connection
from engine.entities import (
    Candidate,
    Mention,
    normalize_name,
    resolve_mention,
    trigram_similarity,
)
from engine.retain.payloads import StagedFacts

ENTITY_NAMESPACE = uuid.UUID("0c7d7e0e-2b4a-4f51-9d8e-51e9f1a0b7c3")
# Candidates per mention: exact name or alias hits plus trigram neighbours of the normalised
# name (pg_trgm's `%`, similarity >= 0.3, served by the GIN index). The decision itself is
# engine.entities.resolve_mention's, which is far stricter than the candidate floor.
CANDIDATE_LIMIT = 20
TRIGRAM_FLOOR = 0.3  # pg_trgm.similarity_threshold's default, for entities of this batch
# Mentions of a candidate read to estimate its co-occurring set, which only ranks accepted
# candidates (the Jaccard term of the score); the evidence that accepts one (entities it
# shares with the fact) is exact.
COOCCURRENCE_SAMPLE = 200


def entity_id(bank_id: str, normalized: str) -> str:
    return str(uuid.uuid5(ENTITY_NAMESPACE, f"{bank_id}\x1f{normalized}"))


_STAGED = """
SELECT fact_id::text, fact->'entities' AS entities, fact->'_chunk'->>'mentioned_at' AS seen
FROM staged_facts WHERE fact_id = ANY($1) ORDER BY fact_id
"""

_COLUMNS = """e.id::text AS id, e.canonical_name, e.normalized_name, e.aliases, e.kind,
       e.last_seen"""

_EXACT = f"""
SELECT {_COLUMNS} FROM entities e
WHERE e.bank_id = $1 AND e.normalized_name = ANY($2::text[])
"""

# Each branch of the OR has an index (unique name, GIN aliases from 0010, GIN trigrams).
_CANDIDATES = f"""
SELECT k.key, {_COLUMNS}, similarity(e.normalized_name, k.key) AS similarity
FROM unnest($2::text[]) AS k(key)
CROSS JOIN LATERAL (
    SELECT * FROM entities e
    WHERE e.bank_id = $1
      AND (e.normalized_name = k.key OR e.aliases_normalized @> ARRAY[k.key]
           OR e.normalized_name % k.key)
    ORDER BY similarity(e.normalized_name, k.key) DESC, e.id
    LIMIT $3
) e
"""

_SAMPLE_COOCCURRING = """
SELECT c.id::text AS id, coalesce(array(
    SELECT DISTINCT other.entity_id::text
    FROM (SELECT ue.unit_id FROM unit_entities ue WHERE ue.entity_id = c.id
          ORDER BY ue.unit_id LIMIT $2) mine
    JOIN unit_entities other ON other.unit_id = mine.unit_id AND other.entity_id <> c.id
), '{}') AS cooccurring
FROM unnest($1::uuid[]) AS c(id)
"""

# Pairs (candidate, friend) that have appeared in one fact. Each pair walks the mentions of
# its less mentioned entity and probes the other's by primary key, so the cost is bounded by
# the rarer of the two, not by how popular the other is.
_COOCCURS = """
SELECT p.c::text AS c, p.f::text AS f
FROM unnest($1::uuid[], $2::uuid[]) AS p(c, f)
JOIN entities ec ON ec.id = p.c
JOIN entities ef ON ef.id = p.f
CROSS JOIN LATERAL (
    SELECT CASE WHEN ec.mention_count <= ef.mention_count THEN p.c ELSE p.f END AS a,
           CASE WHEN ec.mention_count <= ef.mention_count THEN p.f ELSE p.c END AS b
) side
WHERE EXISTS (SELECT 1 FROM unit_entities ua
              JOIN unit_entities ub ON ub.unit_id = ua.unit_id AND ub.entity_id = side.b
              WHERE ua.entity_id = side.a)
"""

# An entity's id is a function of its bank and name (`entity_id`), so another batch creating
# the same name meanwhile conflicts on the primary key as well as on the name: every unique
# index arbitrates. With the name's index alone, a batch whose check came between the other
# row's two index entries failed on the primary key (once in bench/entity_skew.py's 100k
# import; the activity's retry then succeeded).
_CREATE = """
INSERT INTO entities (id, bank_id, canonical_name, normalized_name, kind, aliases,
                      aliases_normalized, first_seen, last_seen)
SELECT n.id, $1, n.name, n.key, n.kind, '{}', '{}', n.seen, n.seen
FROM unnest($2::uuid[], $3::text[], $4::text[], $5::text[], $6::timestamptz[])
     AS n(id, name, key, kind, seen)
ORDER BY n.key
ON CONFLICT DO NOTHING
RETURNING normalized_name
"""

_ADD_ALIASES = """
UPDATE entities e
SET aliases = e.aliases || a.names, aliases_normalized = e.aliases_normalized || a.keys
FROM (
    SELECT a.id, array_agg(a.name ORDER BY a.ord) AS names, array_agg(a.key ORDER BY a.ord) AS keys
    FROM unnest($1::uuid[], $2::text[], $3::text[]) WITH ORDINALITY AS a(id, name, key, ord)
    JOIN entities x ON x.id = a.id
    WHERE NOT (a.key = ANY(x.aliases_normalized)) AND x.normalized_name <> a.key
    GROUP BY a.id
) a
WHERE e.id = a.id
"""
_LOCK_ALIASED = """
SELECT count(*) FROM (
    SELECT 1 FROM entities WHERE id = ANY($1::uuid[]) ORDER BY id FOR NO KEY UPDATE
) locked
"""

_SET_IDS = """
UPDATE staged_facts AS s SET entity_ids = v.ids::uuid[]
FROM (SELECT unnest($1::uuid[]) AS fact_id, unnest($2::text[]) AS ids) AS v
WHERE s.fact_id = v.fact_id
"""


@dataclass(frozen=True)
class _Known:
    """An entity as the batch sees it: stored, or created by an earlier mention."""

    id: str
    canonical_name: str
    key: str
    aliases: tuple[str, ...]
    kind: str
    last_seen: datetime | None


@dataclass
class _Batch:
    """What one batch's resolution has decided so far."""

    bank_id: str
    resolved: dict[str, str] = field(default_factory=dict)  # normalised mention -> entity id
    created: dict[str, _Known] = field(default_factory=dict)  # key -> entity to insert
    aliases: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # id -> (alias, key)


def _parse_time(raw: str | None) -> datetime | None:
    return datetime.fromisoformat(raw) if raw else None


def _known(row: asyncpg.Record) -> _Known:
    return _Known(
        row["id"],
        row["canonical_name"],
        row["normalized_name"],
        tuple(row["aliases"]),
        row["kind"],
        row["last_seen"],
    )


def _kinds_compatible(a: str, b: str) -> bool:
    return a == b or "other" in (a, b)


# One fact's mentions: (fact id, [(name, kind)], when it was seen).
FactMentions = tuple[str, Sequence[tuple[str, str]], datetime | None]


async def resolve_staged_entities(conn: Connection, staged: StagedFacts) -> int:
    """Resolve every mention once per batch; returns how many new entities were created."""
    rows = await conn.fetch(_STAGED, staged.fact_ids)
    facts = [
        (
            row["fact_id"],
            [(e["name"], e.get("kind", "other")) for e in (row["entities"] or [])],
            _parse_time(row["seen"]),
        )
        for row in rows
    ]
    resolved, created = await resolve_mentions(conn, staged.bank_id, facts)
    if resolved:
        fact_ids = list(resolved)
        await conn.execute(
            _SET_IDS, fact_ids, ["{" + ",".join(resolved[f]) + "}" for f in fact_ids]
        )
    return created


async def resolve_mentions(
    conn: Connection, bank_id: str, facts: Sequence[FactMentions]
) -> tuple[dict[str, list[str]], int]:
    """Each fact's entity ids (mentions resolved as retain does, new entities stored) and how
    many entities were created. Also what a correction's `resolve_entities` runs."""
    first_kind: dict[str, str] = {}
    for _, mentions, _ in facts:
        for name, kind in mentions:
            key = normalize_name(name)
            if key:
                first_kind.setdefault(key, kind)
    exact = {
        r["normalized_name"]: _known(r)
        for r in await conn.fetch(_EXACT, bank_id, sorted(first_kind))
    }
    batch = _Batch(bank_id)
    for key, kind in first_kind.items():
        hit = exact.get(key)
        if hit is not None and _kinds_compatible(kind, hit.kind):
            batch.resolved[key] = hit.id  # tier 0: the canonical name decides
    slow = sorted(k for k in first_kind if k not in batch.resolved)
    candidates: dict[str, list[tuple[float, _Known]]] = {}
    if slow:
        for r in await conn.fetch(_CANDIDATES, bank_id, slow, CANDIDATE_LIMIT):
            candidates.setdefault(r["key"], []).append((float(r["similarity"]), _known(r)))
    sampled = await _sample_cooccurring(
        conn, {k.id for found in candidates.values() for _, k in found}
    )

    fact_ids: list[str] = []
    fact_entities: list[str] = []
    for fact_id, mentions, seen_at in facts:
        names = frozenset(normalize_name(name) for name, _ in mentions)
        ids: list[str] = []
        for name, kind in mentions:
            key = normalize_name(name)
            if not key:
                continue
            if key not in batch.resolved:
                mention = Mention(
                    name=name, kind=kind, seen_at=seen_at, cooccurring_names=names - {key}
                )
                friends = frozenset(batch.resolved[n] for n in names if n in batch.resolved)
                await _resolve_slow(
                    conn, batch, mention, key, friends, candidates.get(key, []), sampled
                )
            if batch.resolved[key] not in ids:
                ids.append(batch.resolved[key])
        fact_ids.append(fact_id)
        fact_entities.append("{" + ",".join(ids) + "}")
    created = await _store(conn, batch)
    resolved = {
        fact_id: [i for i in _remap(ids, created).strip("{}").split(",") if i]
        for fact_id, ids in zip(fact_ids, fact_entities, strict=True)
    }
    return resolved, sum(1 for new_id in created.values() if new_id is None)


async def _sample_cooccurring(conn: Connection, ids: Iterable[str]) -> dict[str, frozenset[str]]:
    wanted = sorted(ids)
    if not wanted:
        return {}
    rows = await conn.fetch(_SAMPLE_COOCCURRING, wanted, COOCCURRENCE_SAMPLE)
    return {r["id"]: frozenset(r["cooccurring"]) for r in rows}


async def _resolve_slow(
    conn: Connection,
    batch: _Batch,
    mention: Mention,
    key: str,
    friends: frozenset[str],
    stored: Sequence[tuple[float, _Known]],
    sampled: dict[str, frozenset[str]],
) -> None:
    """Decide a name that is no entity's canonical name: merge it (and note the alias) or
    plan a new entity under its key."""
    found = {k.id: (similarity, k) for similarity, k in stored}
    for made in batch.created.values():  # earlier mentions' new entities are candidates too
        similarity = trigram_similarity(made.key, key)
        if similarity >= TRIGRAM_FLOOR or made.key == key:
            found[made.id] = (similarity, made)
    ranked = sorted(found.values(), key=lambda pair: (-pair[0], pair[1].id))[:CANDIDATE_LIMIT]
    known = [k for _, k in ranked]
    shared = await _shared_with(conn, known, friends, batch)
    pending = batch.aliases
    candidates = [
        Candidate(
            entity_id=k.id,
            canonical_name=k.canonical_name,
            aliases=(*k.aliases, *(alias for alias, _ in pending.get(k.id, []))),
            kind=k.kind,
            last_seen=k.last_seen,
            cooccurring=sampled.get(k.id, frozenset()) | shared.get(k.id, frozenset()),
        )
        for k in known
    ]
    resolution = resolve_mention(mention, candidates, friends)
    if resolution.entity_id is not None:
        pending.setdefault(resolution.entity_id, []).append((mention.name.strip(), key))
        batch.resolved[key] = resolution.entity_id
        return
    new_id = entity_id(batch.bank_id, key)
    batch.created[key] = _Known(
        new_id, mention.name.strip(), key, (), mention.kind, mention.seen_at
    )
    batch.resolved[key] = new_id


async def _shared_with(
    conn: Connection, known: Sequence[_Known], friends: frozenset[str], batch: _Batch
) -> dict[str, frozenset[str]]:
    """For each stored candidate, which of `friends` it has appeared with in a stored fact."""
    new_ids = {k.id for k in batch.created.values()}
    pairs = [
        (k.id, f)
        for k in known
        if k.id not in new_ids
        for f in sorted(friends - new_ids)
        if f != k.id
    ]
    if not pairs:
        return {}
    shared: dict[str, set[str]] = {}
    for r in await conn.fetch(_COOCCURS, [c for c, _ in pairs], [f for _, f in pairs]):
        shared.setdefault(r["c"], set()).add(r["f"])
    return {c: frozenset(fs) for c, fs in shared.items()}


async def _store(conn: Connection, batch: _Batch) -> dict[str, str | None]:
    """Insert the batch's new entities, then its aliases. Returns, per planned entity id,
    None when this batch created it, or the id of the entity another batch stored under the
    same key meanwhile."""
    outcome: dict[str, str | None] = {}
    if batch.created:
        made = sorted(batch.created.values(), key=lambda k: k.key)
        inserted = {
            r["normalized_name"]
            for r in await conn.fetch(
                _CREATE,
                batch.bank_id,
                [k.id for k in made],
                [k.canonical_name for k in made],
                [k.key for k in made],
                [k.kind for k in made],
                [k.last_seen for k in made],
            )
        }
        lost = [k for k in made if k.key not in inserted]
        theirs: dict[str, str] = {}
        if lost:
            stored = await conn.fetch(_EXACT, batch.bank_id, [k.key for k in lost])
            theirs = {r["normalized_name"]: r["id"] for r in stored}
        for k in made:
            outcome[k.id] = None if k.key in inserted else theirs.get(k.key, k.id)
    aliased = sorted(batch.aliases)
    if aliased:
        additions = sorted(
            (outcome.get(eid) or eid, alias, key)
            for eid in aliased
            for alias, key in batch.aliases[eid]
        )
        await conn.execute(_LOCK_ALIASED, sorted({a[0] for a in additions}))
        await conn.execute(
            _ADD_ALIASES,
            [a[0] for a in additions],
            [a[1] for a in additions],
            [a[2] for a in additions],
        )
    return outcome


def _remap(ids: str, outcome: dict[str, str | None]) -> str:
    """Planned ids replaced by the stored entity's where another batch won the key."""
    if not any(outcome.get(i) for i in ids.strip("{}").split(",")):
        return ids
    parts = [outcome.get(i) or i for i in ids.strip("{}").split(",") if i]
    return "{" + ",".join(dict.fromkeys(parts)) + "}"
