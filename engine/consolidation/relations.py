"""How two facts or observations bear on each other: support, contradiction, or nothing;
and the statement of a belief after a contradiction.

Two claims (claims.py) on one subject and aspect contradict when their polarity flips on an
overlapping topic ("struggles with async Python" vs "wrote async database calls": both about
`async`), or when an exclusive attribute takes another value ("prefers tea" vs "prefers
coffee"). Texts that do not parse fall back to guards used with embedding similarity: a
negation present in one text only, and changed numbers ("has two kids" vs "has three kids").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from engine.consolidation.claims import PARENTHETICAL, Claim, timeless
from engine.text import tokenize

RelationKind = Literal["supports", "contradicts", "unrelated"]

# Share of the smaller topic's terms the other must contain for two claims to be about the
# same thing: "async python" vs "async database calls" share 1 of 2.
TOPIC_OVERLAP = 0.5


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_NEGATION = re.compile(r"\b(?:not|never|no longer|cannot|nobody|nothing)\b|n['’]t\b", re.I)
_NUMBER_WORDS = (
    "zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|"
    "fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|hundred"
)
_NUMBER = re.compile(rf"\b(?:\d+(?:[.,]\d+)?|{_NUMBER_WORDS})\b", re.I)
_MONTHS = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
    r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
_DATE = re.compile(
    rf"\b(?:\d{{1,2}}(?:st|nd|rd|th)?\s+{_MONTHS}(?:\s+\d{{4}})?"
    rf"|{_MONTHS}\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+\d{{4}})?"
    rf"|\d{{4}}-\d{{2}}-\d{{2}}|(?:19|20)\d{{2}})\b",
    re.I,
)
_IRREGULAR_PAST = _words(
    "went made took saw ate ran got gave came bought spent won lost met did wrote built found "
    "left began drove flew sang swam sent paid told said heard held kept brought caught taught "
    "sold thought became grew threw wore drew fell rode spoke woke chose broke forgot"
)
# A past participle after a form of "be" is a state ("is married", "was based in").
_PAST_ED = re.compile(
    r"(?<!\bis )(?<!\bam )(?<!\bare )(?<!\bwas )(?<!\bwere )(?<!\bbe )(?<!\bbeen )"
    r"\b[a-z]{3,}ed\b"
)
_NOT_PAST = _words(
    "need feed speed seed breed proceed exceed succeed hundred indeed kindred named based"
)


@dataclass(frozen=True)
class Relation:
    kind: RelationKind
    reason: str = ""


SUPPORTS = Relation("supports")
UNRELATED = Relation("unrelated")


def same_topic(a: frozenset[str], b: frozenset[str]) -> bool:
    if not a or not b:
        return False
    return len(a & b) / min(len(a), len(b)) >= TOPIC_OVERLAP


def same_value(a: Claim, b: Claim) -> bool:
    """Values of an exclusive attribute are the same when one's terms include the other's
    ("tea" / "tea in the afternoon") or one's name contains the other's ("Postgres" /
    "PostgreSQL"); a shared word alone is not enough ("dark mode" / "light mode")."""
    if a.terms <= b.terms or b.terms <= a.terms:
        return True
    x, y = (re.sub(r"\W+", "", c.object.casefold()) for c in (a, b))
    return bool(x and y) and (x in y or y in x)


def relate_claims(old: Claim, new: Claim) -> Relation:
    """How `new` bears on `old`; unrelated unless both are about one subject and aspect."""
    if old.subject != new.subject or old.aspect != new.aspect:
        return UNRELATED
    topical = same_topic(old.terms, new.terms)
    if old.polarity != new.polarity:
        if topical:
            return Relation("contradicts", f"negation flip: {old.predicate} → {new.predicate}")
        return UNRELATED
    if old.exclusive and old.polarity > 0:
        if same_value(old, new):
            return SUPPORTS
        return Relation("contradicts", f"changed {old.aspect}: {old.object} → {new.object}")
    return SUPPORTS if topical else UNRELATED


def negated(text: str) -> bool:
    return _NEGATION.search(text) is not None


def numbers(text: str) -> frozenset[str]:
    """Numbers a text states about its subject: dates and parentheticals do not count."""
    undated = _DATE.sub(" ", PARENTHETICAL.sub(" ", text))
    return frozenset(m.group().casefold() for m in _NUMBER.finditer(undated))


def happened(text: str) -> bool:
    """Whether a text tells of an event (a past-tense verb) rather than a state."""
    lowered = text.casefold()
    if any(word in _IRREGULAR_PAST for word in re.findall(r"[a-z]+", lowered)):
        return True
    return any(m.group() not in _NOT_PAST for m in _PAST_ED.finditer(lowered))


def _without_numbers(text: str) -> list[str]:
    undated = _DATE.sub(" ", PARENTHETICAL.sub(" ", text))
    return tokenize(_NUMBER.sub(" ", undated))


def text_relation(old_text: str, new_text: str) -> Relation:
    """Two similar texts support each other unless a guard sees otherwise: a negation in one
    only contradicts; different numbers contradict when they are all that differs in a
    state ("has two / three kids"), and tell of different events otherwise ("tried 3 dishes
    on day 1" / "tried 5 dishes on day 2")."""
    if negated(old_text) != negated(new_text):
        return Relation("contradicts", "negation flip")
    old_numbers, new_numbers = numbers(old_text), numbers(new_text)
    if old_numbers and new_numbers and old_numbers != new_numbers:
        if happened(old_text) or happened(new_text):
            return UNRELATED
        if _without_numbers(old_text) != _without_numbers(new_text):
            return UNRELATED
        change = f"{', '.join(sorted(old_numbers))} → {', '.join(sorted(new_numbers))}"
        return Relation("contradicts", f"changed value: {change}")
    return SUPPORTS


def relate(
    old_claim: Claim | None,
    old_text: str,
    new_claim: Claim | None,
    new_text: str,
    similarity: float,
    join_similarity: float,
) -> Relation:
    """Claims decide when both parse (other subjects never relate); otherwise texts at least
    `join_similarity` alike relate as `text_relation` says."""
    if old_claim is not None and new_claim is not None:
        if old_claim.subject != new_claim.subject:
            return UNRELATED  # never one belief about two people
        if old_claim.aspect == new_claim.aspect:
            return relate_claims(old_claim, new_claim)
    if similarity >= join_similarity:
        return text_relation(old_text, new_text)
    return UNRELATED


def _no_longer(predicate: str) -> str | None:
    """'struggles with' → 'no longer struggles with'; None when that would not read."""
    if negated(predicate):
        return None
    words = predicate.split()
    if words[0] in ("is", "was"):
        return "is no longer " + " ".join(words[1:])
    if words[0] in ("has", "does") or (words[0].endswith("s") and not words[0].endswith("ss")):
        return "no longer " + predicate
    return None


def revised_statement(old_text: str, new_text: str, old: Claim | None, new: Claim | None) -> str:
    """The belief after `new_text` contradicted `old_text`: the new state first, the old one
    kept as what no longer holds ("used to X, now Y")."""
    core = timeless(new_text).rstrip(" .!?;")
    old_core = timeless(old_text).rstrip(" .!?;")
    first_person = new is not None and new.subject_text in ("I", "We")
    if old is None or new is None or old.subject != new.subject or first_person:
        return f"{core} (previously: {old_core})."
    gone = _no_longer(old.predicate)
    if old.aspect == "competence" and old.polarity < 0 < new.polarity:
        no_longer = f" and {gone} it" if gone else ""
        return f"{new.subject_text} is growing comfortable with {old.object}{no_longer}: {core}."
    if gone:
        return f"{core}, and {gone} {old.object}."
    return f"{core} (previously: {old_core})."


def merged_claim(old: Claim | None, new: Claim | None) -> Claim | None:
    """The claim of an observation revised by `new`: the new state, over the union of both
    topics, so a later fact about either topic still finds it."""
    if new is None:
        return old
    if old is None or old.subject != new.subject or old.aspect != new.aspect:
        return new
    if old.exclusive:
        return new
    return Claim(
        new.subject,
        new.subject_text,
        new.aspect,
        new.polarity,
        new.exclusive,
        new.predicate,
        old.object,
        old.terms | new.terms,
    )
