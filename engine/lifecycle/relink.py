"""Replacing a fact's entities (PATCH .../memories/{id} with `entities`, Hindsight's shape).

With `resolve` (Hindsight's `resolve_entities`, true by default) the names are resolved as
retain resolves a fact's mentions (engine/retain/resolve.py `resolve_mentions`): a similar
existing entity is reused when it scores above the match threshold (the name then becomes
its alias), anything else is a new entity. Without it names are matched literally: an entity
whose normalised name or alias equals the normalised name is reused, any other name becomes
a new entity (under retain's deterministic id) — for hand-written corrections, where the
name sent is the answer rather than a guess.

A corrected text without `entities` is resolved again too (`names_for_text`): the local
recogniser's names in the new text are added, and an entity whose name (or an alias) was in
the old text but is in the new one no more is dropped; entities the text never spelled out
(a model's reading, "the user") stay. Then, in the caller's transaction: the fact's mentions
are replaced, mention counts follow, entities left with no mention are deleted, and the fact's
entity links are rebuilt to the ENTITY_K most recent other facts of each entity, weighted as
retain weighs them (1 / ln(e + mentions)).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from engine.db import Connection
from engine.entities import normalize_name
from engine.errors import InvalidInput
from engine.extraction.local_entities import find_entities
from engine.retain.links import ENTITY_K, entity_weight
from engine.retain.resolve import entity_id, resolve_mentions
from engine.retain.upsert import DELETE_ORPHAN_ENTITIES

MAX_ENTITIES = 50

_MATCH = """
SELECT id::text AS id, normalized_name, aliases_normalized FROM entities
WHERE bank_id = $1 AND (normalized_name = ANY($2::text[]) OR aliases_normalized && $2::text[])
ORDER BY id
"""

_CREATE = """
INSERT INTO entities (id, bank_id, canonical_name, normalized_name, first_seen, last_seen)
SELECT u.id, $1, u.name, u.normalized, now(), now()
FROM unnest($2::uuid[], $3::text[], $4::text[]) AS u(id, name, normalized)
ON CONFLICT (bank_id, normalized_name) DO NOTHING
"""

_CURRENT = "SELECT entity_id::text FROM unit_entities WHERE unit_id = $1 ORDER BY entity_id"

_NAMED = """
SELECT e.canonical_name, e.aliases FROM unit_entities ue JOIN entities e ON e.id = ue.entity_id
WHERE ue.unit_id = $1 ORDER BY e.canonical_name
"""

_DETACH = "DELETE FROM unit_entities WHERE unit_id = $1 AND entity_id = ANY($2::uuid[])"

_ATTACH = """
INSERT INTO unit_entities (unit_id, entity_id, bank_id)
SELECT $1, unnest($2::uuid[]), $3 ON CONFLICT DO NOTHING
"""

_COUNT = "UPDATE entities SET mention_count = greatest(0, mention_count + $2) WHERE id = ANY($1)"

_DROP_LINKS = """
DELETE FROM memory_links WHERE link_type = 'entity' AND (from_unit = $1 OR to_unit = $1)
"""

_NEIGHBOURS = """
SELECT e.mention_count, n.unit_id::text AS unit_id FROM entities e
CROSS JOIN LATERAL (
    SELECT ue.unit_id FROM unit_entities ue JOIN memory_units m ON m.id = ue.unit_id
    WHERE ue.entity_id = e.id AND ue.unit_id <> $2 AND m.fact_type <> 'observation'
    ORDER BY coalesce(m.occurred_start, m.mentioned_at) DESC NULLS LAST, m.id
    LIMIT $3
) n
WHERE e.id = ANY($1::uuid[])
"""

_LINK = """
INSERT INTO memory_links (bank_id, from_unit, to_unit, link_type, weight)
SELECT $1, $2, u.to_unit, 'entity', u.weight
FROM unnest($3::uuid[], $4::float8[]) AS u(to_unit, weight)
ON CONFLICT DO NOTHING
"""


def _names(names: Sequence[str]) -> dict[str, str]:
    """normalised -> the name as written, in order, each once."""
    if len(names) > MAX_ENTITIES:
        raise InvalidInput("entities", f"at most {MAX_ENTITIES} names")
    wanted: dict[str, str] = {}
    for name in names:
        normalized = normalize_name(name) if isinstance(name, str) else ""
        if not normalized:
            raise InvalidInput("entities", "names must not be empty")
        wanted.setdefault(normalized, name.strip())
    return wanted


def _spelled(name: str, text: str) -> bool:
    """Whether the text spells the name out (whole words; any substring for scripts without
    spaces)."""
    key = normalize_name(name)
    if not key.isascii():
        return key in normalize_name(text)
    words = " ".join(normalize_name(word) for word in text.split())
    return f" {key} " in f" {words} "


async def names_for_text(
    conn: Connection, memory_id: str, old_text: str, new_text: str
) -> list[str] | None:
    """The entity names a corrected text implies (module docstring); None when unchanged."""
    current = await conn.fetch(_NAMED, memory_id)
    kept = [
        r["canonical_name"]
        for r in current
        if not any(_spelled(n, old_text) for n in (r["canonical_name"], *r["aliases"]))
        or any(_spelled(n, new_text) for n in (r["canonical_name"], *r["aliases"]))
    ]
    known = frozenset(r["canonical_name"] for r in current)
    found = [e.name for e in find_entities(new_text, known, frozenset())]
    names = list(dict.fromkeys([*kept, *found]))
    keys = {normalize_name(n) for n in names}
    if keys == {normalize_name(r["canonical_name"]) for r in current}:
        return None
    return names


async def replace_entities(
    conn: Connection,
    bank_id: str,
    memory_id: str,
    names: Sequence[str],
    resolve: bool = False,
    seen: datetime | None = None,
) -> tuple[list[str], list[str]]:
    """The fact's entity ids before and after; run inside the correction's transaction.
    `seen` (when the fact was mentioned) weighs recency in `resolve`'s scoring."""
    wanted = _names(names)
    if resolve:
        after = await _resolved(conn, bank_id, memory_id, wanted, seen)
    else:
        after = await _literal(conn, bank_id, wanted)
    before = [r["entity_id"] for r in await conn.fetch(_CURRENT, memory_id)]
    removed = sorted(set(before) - set(after))
    added = sorted(set(after) - set(before))
    if removed:
        await conn.execute(_DETACH, memory_id, removed)
        await conn.execute(_COUNT, removed, -1)
    if added:
        await conn.execute(_ATTACH, memory_id, added, bank_id)
        await conn.execute(_COUNT, added, 1)
    await conn.execute(DELETE_ORPHAN_ENTITIES, bank_id, removed)
    await conn.execute(_DROP_LINKS, memory_id)
    weights: dict[str, float] = {}
    for row in await conn.fetch(_NEIGHBOURS, after, memory_id, ENTITY_K):
        weight = entity_weight(int(row["mention_count"]))
        weights[row["unit_id"]] = max(weights.get(row["unit_id"], 0.0), weight)
    if weights:
        targets = sorted(weights)
        await conn.execute(_LINK, bank_id, memory_id, targets, [weights[t] for t in targets])
    return before, after


async def _resolved(
    conn: Connection,
    bank_id: str,
    memory_id: str,
    wanted: dict[str, str],
    seen: datetime | None,
) -> list[str]:
    mentions = [(name, "other") for name in wanted.values()]
    resolved, _ = await resolve_mentions(conn, bank_id, [(memory_id, mentions, seen)])
    return sorted(set(resolved[memory_id]))


async def _literal(conn: Connection, bank_id: str, wanted: dict[str, str]) -> list[str]:
    keys = sorted(wanted)
    found: dict[str, str] = {}
    for row in await conn.fetch(_MATCH, bank_id, keys):
        if row["normalized_name"] in wanted:
            found[row["normalized_name"]] = row["id"]
        for alias in row["aliases_normalized"]:
            if alias in wanted:
                found.setdefault(alias, row["id"])
    missing = [k for k in keys if k not in found]
    if missing:
        ids = [entity_id(bank_id, k) for k in missing]
        await conn.execute(_CREATE, bank_id, ids, [wanted[k] for k in missing], missing)
        found.update(zip(missing, ids, strict=True))
    return sorted(set(found.values()))
