"""Step 4: resolve the staged facts' entity mentions to the bank's canonical entities."""

from __future__ import annotations

import uuid
from datetime import datetime

from engine.db import Connection
from engine.entities import Candidate, Mention, normalize_name, resolve_mention
from engine.retain.payloads import StagedFacts

ENTITY_NAMESPACE = uuid.UUID("0c7d7e0e-2b4a-4f51-9d8e-51e9f1a0b7c3")
# Candidates per mention: exact name or alias hits plus trigram neighbours of the normalised
# name (pg_trgm's `%`, similarity >= 0.3, served by the GIN index). The decision itself is
# engine.entities.resolve_mention's, which is far stricter than the candidate floor.
CANDIDATE_LIMIT = 20


def entity_id(bank_id: str, normalized: str) -> str:
    return str(uuid.uuid5(ENTITY_NAMESPACE, f"{bank_id}\x1f{normalized}"))


_STAGED = """
SELECT fact_id::text, fact->'entities' AS entities, fact->'_chunk'->>'mentioned_at' AS seen
FROM staged_facts WHERE fact_id = ANY($1) ORDER BY fact_id
"""

_CANDIDATES = """
SELECT e.id::text, e.canonical_name, e.aliases, e.kind, e.last_seen,
       coalesce(array(
           SELECT DISTINCT ue2.entity_id::text FROM unit_entities ue
           JOIN unit_entities ue2 ON ue2.unit_id = ue.unit_id AND ue2.entity_id <> ue.entity_id
           WHERE ue.entity_id = e.id LIMIT 200), '{}') AS cooccurring
FROM entities e
WHERE e.bank_id = $1
  AND (e.normalized_name = $2 OR $2 = ANY(e.aliases_normalized)
       OR e.normalized_name % $2)
ORDER BY similarity(e.normalized_name, $2) DESC, e.id
LIMIT $3
"""

_CREATE = """
INSERT INTO entities (id, bank_id, canonical_name, normalized_name, kind, aliases,
                      aliases_normalized, first_seen, last_seen)
VALUES ($1, $2, $3, $4, $5, '{}', '{}', $6, $6)
ON CONFLICT (bank_id, normalized_name) DO NOTHING
"""

_ADD_ALIAS = """
UPDATE entities SET aliases = array_append(aliases, $2),
                    aliases_normalized = array_append(aliases_normalized, $3)
WHERE id = $1 AND NOT ($3 = ANY(aliases_normalized)) AND normalized_name <> $3
"""

# Concurrent retains of one bank resolve their batches in parallel transactions. Each first
# takes a transaction-level lock per normalised name it will resolve, in sorted order, so two
# batches that share names serialise on them instead of deadlocking on the unique index
# (one inserting "A" then "B", the other "B" then "A"); alias additions to existing entities
# are applied last, in entity-id order, which is also the order upsert locks entity rows in.
_LOCK_NAMES = """
SELECT count(pg_advisory_xact_lock(
    hashtextextended('entity' || E'\\x1f' || $1 || E'\\x1f' || k, 0)))
FROM unnest($2::text[]) AS k
"""

_SET_IDS = """
UPDATE staged_facts AS s SET entity_ids = v.ids::uuid[]
FROM (SELECT unnest($1::uuid[]) AS fact_id, unnest($2::text[]) AS ids) AS v
WHERE s.fact_id = v.fact_id
"""


def _parse_time(raw: str | None) -> datetime | None:
    return datetime.fromisoformat(raw) if raw else None


async def resolve_staged_entities(conn: Connection, staged: StagedFacts) -> int:
    """Resolve every mention once per batch; returns how many new entities were created."""
    rows = await conn.fetch(_STAGED, staged.fact_ids)
    keys = {normalize_name(e["name"]) for row in rows for e in (row["entities"] or [])}
    await conn.execute(_LOCK_NAMES, staged.bank_id, sorted(k for k in keys if k))
    resolved: dict[str, str] = {}  # normalised mention -> entity id
    aliases: dict[str, list[tuple[str, str]]] = {}  # entity id -> (alias, normalised) to add
    created = 0
    fact_ids: list[str] = []
    fact_entities: list[str] = []
    for row in rows:
        mentions = [(e["name"], e.get("kind", "other")) for e in (row["entities"] or [])]
        names = frozenset(normalize_name(name) for name, _ in mentions)
        seen_at = _parse_time(row["seen"])
        ids: list[str] = []
        for name, kind in mentions:
            key = normalize_name(name)
            if not key:
                continue
            if key not in resolved:
                mention = Mention(
                    name=name, kind=kind, seen_at=seen_at, cooccurring_names=names - {key}
                )
                cooccurring_ids = frozenset(resolved[n] for n in names if n in resolved)
                match, was_created = await _resolve_one(
                    conn, staged.bank_id, mention, key, cooccurring_ids, aliases
                )
                resolved[key] = match
                created += was_created
            if resolved[key] not in ids:
                ids.append(resolved[key])
        fact_ids.append(row["fact_id"])
        fact_entities.append("{" + ",".join(ids) + "}")
    for eid in sorted(aliases):
        for alias, key in aliases[eid]:
            await conn.execute(_ADD_ALIAS, eid, alias, key)
    if fact_ids:
        await conn.execute(_SET_IDS, fact_ids, fact_entities)
    return created


async def _resolve_one(
    conn: Connection,
    bank_id: str,
    mention: Mention,
    key: str,
    cooccurring_ids: frozenset[str],
    aliases: dict[str, list[tuple[str, str]]],
) -> tuple[str, bool]:
    """The entity `mention` names, and whether it was created. Aliases found for existing
    entities are collected in `aliases` (and seen by later mentions of the batch)."""
    rows = await conn.fetch(_CANDIDATES, bank_id, key, CANDIDATE_LIMIT)
    candidates = [
        Candidate(
            entity_id=row["id"],
            canonical_name=row["canonical_name"],
            aliases=(*row["aliases"], *(a for a, _ in aliases.get(row["id"], []))),
            kind=row["kind"],
            last_seen=row["last_seen"],
            cooccurring=frozenset(row["cooccurring"]),
        )
        for row in rows
    ]
    resolution = resolve_mention(mention, candidates, cooccurring_ids)
    if resolution.entity_id is not None:
        aliases.setdefault(resolution.entity_id, []).append((mention.name.strip(), key))
        return resolution.entity_id, False
    new_id = entity_id(bank_id, key)
    status = await conn.execute(
        _CREATE, new_id, bank_id, mention.name.strip(), key, mention.kind, mention.seen_at
    )
    if status.endswith(" 0"):
        # Another document created the same name concurrently: use theirs.
        existing = await conn.fetchval(
            "SELECT id::text FROM entities WHERE bank_id = $1 AND normalized_name = $2",
            bank_id,
            key,
        )
        return str(existing), False
    return new_id, True
