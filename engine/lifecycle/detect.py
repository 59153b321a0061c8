"""Local supersession rules: same subject + same attribute + a different value (or a negation).

A fact's *claim* is (attribute, value, negated), read with the cue patterns below (English
and Chinese). A newer fact supersedes an older one when both make a claim on the same
attribute, they share a subject (an entity, or both name none: in an assistant's bank an
unattributed fact is about its user) and either the values differ ("lives in Lisbon" →
"moved to Porto") or the newer one negates the older's value ("no longer works at Acme",
"不再在腾讯工作"). Values are compared case-folded. What no cue covers is left alone: a
missed supersession costs a stale fact ranked among current ones, a wrong one hides a true
fact, so the rules are deliberately narrow; the `llm` path (engine/lifecycle/llm_detect.py)
covers the rest.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from engine.db import Connection
from engine.lifecycle.supersession import Supersession, supersede

_NAME = r"[A-Z][\w&.'-]*(?:\s+(?:of\s+)?[A-Z][\w&.'-]*)*"
_CJK_VALUE = r"[^\s，。,.!！?？、]{1,12}?"
_NEG_EN = re.compile(
    r"\b(no longer|not anymore|any ?more|stopped|quit|left|doesn't|does not)\b", re.IGNORECASE
)
_NEG_ZH = re.compile(r"不再|没有再|离开了?|辞职")

# (attribute, pattern with a `value` group). Order matters: the first match wins.
_CUES: list[tuple[str, re.Pattern[str]]] = [
    (
        "employer",
        re.compile(
            r"\b(?:works?|working|worked|employed|started working|got a job|took a job|"
            r"joined|left|quit)\s+(?:at|for|with|by)?\s*(?P<value>" + _NAME + ")"
        ),
    ),
    (
        "residence",
        re.compile(
            r"\b(?:lives?|living|lived|moved|relocated|based|settled)\s+(?:in|to|at)\s+"
            r"(?P<value>" + _NAME + ")"
        ),
    ),
    (
        "favourite",
        re.compile(
            r"\bfavou?rite\s+(?P<what>\w+)\s+(?:is now|has become|is|was)\s+(?P<value>[^.,;]+)",
            re.IGNORECASE,
        ),
    ),
    (
        "answer_style",
        re.compile(
            r"(?P<value>\b(?:short|brief|concise|terse|one[- ]line|detailed|in detail|every step|"
            r"step[- ]by[- ]step|thorough|long|verbose|bullet points?|prose)\b)"
            r"(?=.*\b(?:answers?|responses?|replies|explanations?|steps?|detail)\b)|"
            r"\b(?:answers?|responses?|replies|explanations?)\b.*?(?P<value2>\b(?:short|brief|"
            r"concise|terse|detailed|thorough|long|verbose)\b)",
            re.IGNORECASE,
        ),
    ),
    (
        "employer",
        re.compile(
            r"(?:换到|加入了?|(?<!现)在|去)(?P<value>" + _CJK_VALUE + r")(?:公司)?(?:工作|上班)"
        ),
    ),
    ("employer", re.compile(r"(?:加入了?|入职)(?P<value>" + _CJK_VALUE + r")(?:[，。,.]|$)")),
    (
        "residence",
        re.compile(
            r"(?:住在|搬到了?|搬去|定居在?)(?P<value>" + _CJK_VALUE + r")(?:了|住|[，。,.]|$)"
        ),
    ),
    ("answer_style", re.compile(r"(?P<value>简短|简洁|简单|详细|每一步|一步一步)")),
    (
        "changed",
        re.compile(
            r"(?P<what>[^\s，。,.]{1,8}?)(?:现在)?(?:改为|改成|换成)(?P<value>"
            + _CJK_VALUE
            + r")(?:了|[，。,.]|$)"
        ),
    ),
]

# Style words that mean the same thing, so "short" does not supersede "brief".
_SYNONYMS = {
    "brief": "short",
    "concise": "short",
    "terse": "short",
    "one line": "short",
    "one-line": "short",
    "简短": "short",
    "简洁": "short",
    "简单": "short",
    "in detail": "detailed",
    "every step": "detailed",
    "step by step": "detailed",
    "step-by-step": "detailed",
    "thorough": "detailed",
    "long": "detailed",
    "verbose": "detailed",
    "详细": "detailed",
    "每一步": "detailed",
    "一步一步": "detailed",
}


@dataclass(frozen=True)
class Claim:
    attribute: str
    value: str
    negated: bool


def claim_of(text: str) -> Claim | None:
    for attribute, pattern in _CUES:
        match = pattern.search(text)
        if match is None:
            continue
        groups = match.groupdict()
        value = (groups.get("value") or groups.get("value2") or "").strip(" .")
        if not value:
            continue
        name = attribute
        if groups.get("what"):
            name = f"{attribute}:{groups['what'].casefold()}"
        normal = value.casefold()
        normal = _SYNONYMS.get(normal, normal)
        negated = bool(_NEG_EN.search(text) or _NEG_ZH.search(text))
        if attribute == "employer" and re.search(r"\b(left|quit)\b", match.group(0)):
            negated = True
        return Claim(name, normal, negated)
    return None


def supersedes(new: Claim, old: Claim) -> bool:
    """Whether a fact claiming `new` replaces one claiming `old` (same subject assumed)."""
    if new.attribute != old.attribute or old.negated:
        return False
    if new.negated:
        return new.value == old.value
    return new.value != old.value


# Older active facts that may share the subject of the new ones: sharing an entity, or, for a
# new fact naming none, the bank's recent facts naming none. Bounded per new fact.
NEW_FACTS = """
SELECT m.id::text AS id, m.text, coalesce(m.valid_from, m.created_at) AS start,
       coalesce(array_agg(ue.entity_id) FILTER (WHERE ue.entity_id IS NOT NULL), '{}') AS entities
FROM memory_units m LEFT JOIN unit_entities ue ON ue.unit_id = m.id
WHERE m.bank_id = $1 AND m.id = ANY($2::uuid[]) AND m.fact_type <> 'observation'
GROUP BY m.id
"""
SHARING = """
SELECT DISTINCT m.id::text AS id, m.text, coalesce(m.valid_from, m.created_at) AS start
FROM unit_entities ue JOIN memory_units m ON m.id = ue.unit_id
WHERE ue.entity_id = ANY($2::uuid[]) AND m.bank_id = $1 AND m.state = 'active'
  AND m.fact_type <> 'observation' AND m.id <> ALL($3::uuid[])
ORDER BY start DESC LIMIT $4
"""
UNNAMED = """
SELECT m.id::text AS id, m.text, coalesce(m.valid_from, m.created_at) AS start
FROM memory_units m
WHERE m.bank_id = $1 AND m.state = 'active' AND m.fact_type <> 'observation'
  AND m.id <> ALL($2::uuid[])
  AND NOT EXISTS (SELECT 1 FROM unit_entities ue WHERE ue.unit_id = m.id)
ORDER BY start DESC LIMIT $3
"""
CANDIDATES = 200


async def apply_local_supersession(
    conn: Connection, bank_id: str, new_ids: Sequence[str]
) -> list[Supersession]:
    """Detect and apply supersessions by the facts `new_ids` just stored; run in the
    transaction that stored them. Returns what was applied."""
    ids = list(new_ids)
    if not ids:
        return []
    applied: list[Supersession] = []
    news = sorted(await conn.fetch(NEW_FACTS, bank_id, ids), key=lambda r: (r["start"], r["id"]))
    for new in news:
        claim = claim_of(new["text"])
        if claim is None:
            continue
        if new["entities"]:
            rows = await conn.fetch(SHARING, bank_id, new["entities"], [new["id"]], CANDIDATES)
        else:
            rows = await conn.fetch(UNNAMED, bank_id, [new["id"]], CANDIDATES)
        for other in rows:
            previous = claim_of(other["text"])
            if previous is None:
                continue
            # Documents of one retain are stored in any order: a fact that arrives after a
            # newer one on the same attribute is itself the superseded one.
            late = other["start"] > new["start"]
            older, newer = (claim, previous) if late else (previous, claim)
            if not supersedes(newer, older):
                continue
            change = Supersession(
                new["id"] if late else other["id"],
                other["id"] if late else new["id"],
                f"local: {older.attribute} {older.value!r} → "
                + ("no longer" if newer.negated else repr(newer.value)),
            )
            if await supersede(conn, bank_id, change):
                applied.append(change)
            if late:
                break
    return applied
