"""Entities of a fact for the local extractor: capitalisation, quotes, cue words and a small
gazetteer decide what is a name and what kind of thing it names."""

from __future__ import annotations

import re
from collections.abc import Iterator

from engine.extraction.lexicon import (
    APOS,
    CAPITALISED,
    COMMON_CAPS,
    CONNECTORS,
    EVENT_SUFFIX,
    EVENTS,
    FILLER,
    HONORIFICS,
    LABELS,
    NAME_LEADS,
    ORG_SUFFIX,
    ORGS,
    PERSON_CUE,
    PLACE_CUE,
    PLACE_SUFFIX,
    PLACES,
    PRODUCT_WORD,
    PRODUCTS,
    QUOTED,
    STOP,
    TIME_WORDS,
    TITLE_CUE,
)
from engine.types import EntityKind, ExtractedEntity


def find_entities(
    body: str, names: frozenset[str], capitalised_mid: frozenset[str]
) -> list[ExtractedEntity]:
    found: dict[str, ExtractedEntity] = {}
    quoted_spans: list[tuple[int, int]] = []
    for m in QUOTED.finditer(body):
        title = (m.group("q") or m.group("s")).strip(" ,.!?")
        found.setdefault(title.lower(), ExtractedEntity(title, "title"))
        quoted_spans.append((m.start(), m.end()))
    sentence_starts = {0} | {m.end() for m in re.finditer(r"[.!?:]\s+|[\"“(]", body)}
    for m in CAPITALISED.finditer(body):
        if any(a <= m.start() < b for a, b in quoted_spans):
            continue
        for start, group, after_the in _name_groups(body, m, names):
            tokens = group
            if start in sentence_starts and len(tokens) > 1 and tokens[0].endswith(("ing", "ly")):
                tokens = tokens[1:]  # "Adding NYC to ..."
            name = " ".join(tokens)
            if len(name) < 2:
                continue
            known = name in names or name.lower() in PLACES or name in capitalised_mid
            if (
                start in sentence_starts
                and len(tokens) == 1
                and not known
                and not after_the
                and not _subject_of_verb(body, start, name)
            ):
                continue  # "Painting is my passion": sentence-initial words are not names
            kind = _kind(name, body[:start], names, after_the)
            found.setdefault(name.lower(), ExtractedEntity(name, kind))
    for product in PRODUCT_WORD.finditer(body):  # "iPhone", "kindle": not always capitalised
        found.setdefault(product.group(0).lower(), ExtractedEntity(product.group(0), "product"))
    return list(found.values())


# "Ivo bought a bicycle": a capitalised first word directly followed by a common verb of a
# person (or "and <Name>") is taken as a name; gerunds ("Painting is") and common words are not.
_PERSON_VERB = re.compile(
    r"\s+(?:is|was|has|had|will|would|can|could|did|does|went|met|said|says|told|tells|got|"
    r"made|makes|took|takes|gave|saw|sees|came|comes|bought|found|felt|feels|thinks|thought|"
    r"loves|loved|likes|liked|wants|wanted|needs|needed|works|worked|lives|lived|moved|"
    r"started|opened|visited|adopted|plays|played|runs|ran|joined|married|studies|studied|"
    r"teaches|taught|wrote|writes|and\s+[A-Z][a-z]+)\b"
)


def _subject_of_verb(body: str, start: int, name: str) -> bool:
    if name.lower().endswith("ing") or is_common(name) or name.lower() in TIME_WORDS:
        return False
    return _PERSON_VERB.match(body, start + len(name)) is not None


def _name_groups(
    body: str, m: re.Match[str], names: frozenset[str]
) -> Iterator[tuple[int, list[str], bool]]:
    """Split a capitalised run into names: "Tell Tim" → "Tim", "John's European trip" →
    "John", "European"; common and time words separate names, "of"/"de" join them."""
    group: list[str] = []
    group_start, after_the, previous_the = m.start(), False, False
    words = [(m.start() + w.start(), w.group(0)) for w in re.finditer(r"\S+", m.group(0))]
    for index, (position, word) in enumerate(words):
        token = word.translate(APOS).rstrip(".,-")
        if re.fullmatch(r"(?:[A-Z]\.)+[A-Z]", token) or token.lower() in HONORIFICS:
            token += "."  # "J.K.", "Dr."
        possessive = token.endswith("'s")
        base = token.removesuffix("'s")
        if base[:1].isdigit():
            if group:  # "Room 101"; a number after a dropped word ("May 2023") is no name
                group.append(base)
            continue
        if group and base.lower() in CONNECTORS:
            group.append(base)
            continue
        leads_name = base.lower() in NAME_LEADS and index + 1 < len(words)
        common = not leads_name and (is_common(base) or base.lower() in TIME_WORDS)
        if common or (base in names and group):
            while group and group[-1].lower() in CONNECTORS:
                group.pop()
            if group:
                yield group_start, group, after_the
            group = []
            if common:
                previous_the = base.lower() == "the"
                continue
        if not group:
            group_start, after_the = position, previous_the
        group.append(base)
        previous_the = False
        if possessive:
            yield group_start, group, after_the
            group = []
    while group and group[-1].lower() in CONNECTORS:
        group.pop()
    if group:
        yield group_start, group, after_the


def is_common(token: str) -> bool:
    lower = token.lower()
    if token.isupper() and len(token) > 1:
        return lower in COMMON_CAPS  # "US" is the country, "OK" is not a name
    if "'" in lower and not lower.endswith("'s"):
        return True  # "They're", "I'm"
    return lower in STOP or lower in FILLER or lower in COMMON_CAPS or lower in LABELS


def _kind(name: str, before: str, names: frozenset[str], after_the: bool) -> EntityKind:
    lower, last = name.lower(), name.rsplit(maxsplit=1)[-1].lower()
    if name in names or name.split(maxsplit=1)[0].lower().rstrip(".") in HONORIFICS:
        return "person"
    if last in ORG_SUFFIX:
        return "organization"
    if lower in PLACES or last in PLACE_SUFFIX:
        return "place"
    if lower in EVENTS or (last in EVENT_SUFFIX and " " in name):
        return "event"
    if lower in ORGS:
        return "organization"
    if lower in PRODUCTS or name.split(maxsplit=1)[0].lower() in PRODUCTS:
        return "product"
    tail = before[-40:]
    if TITLE_CUE.search(tail):
        return "title"
    if PLACE_CUE.search(tail):
        return "place"
    if after_the or before.lower().endswith("the "):
        return "other"  # "the Wolves", "the Hobbit": not a person's name
    if PERSON_CUE.search(tail):
        return "person"
    if name.isupper():
        return "other"  # acronyms: LGBTQ, NASA
    if name.split(maxsplit=1)[0] in names:
        return "person"  # "Caroline Smith"
    return "person" if " " not in name else "other"  # chat: a lone capitalised word is a name
