"""Replacing a fact's entities (PATCH .../memories/{id} with `entities`, Hindsight's shape).

Names are matched literally: an entity of the bank whose normalised name or alias equals the
normalised name is reused, any other name becomes a new entity (under retain's deterministic
id, engine/retain/resolve.py). Hindsight's `resolve_entities: true` would also accept a
similar existing name (retain's fuzzy resolution); that is not done here — a hand-written
correction names the entity it means. Then, in the caller's transaction: the fact's mentions
are replaced, mention counts follow, entities left with no mention are deleted, and the fact's
entity links are rebuilt to the ENTITY_K most recent other facts of each entity, weighted as
retain weighs them (1 / ln(e + mentions)).
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.db import Connection
from engine.entities import normalize_name
from engine.errors import InvalidInput
from engine.retain.links import ENTITY_K, entity_weight
from engine.retain.resolve import entity_id
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


async def replace_entities(
    conn: Connection, bank_id: str, memory_id: str, names: Sequence[str]
) -> tuple[list[str], list[str]]:
    """The fact's entity ids before and after; run inside the correction's transaction."""
    wanted = _names(names)
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
    after = sorted(set(found.values()))
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
