"""What a fact claims, parsed well enough to relate facts without an LLM (relations.py).

A claim is (subject, aspect, polarity, predicate, object). The aspects recognised are the ones
beliefs about people and teams change along:
  competence  "struggles with X" (-) / "is comfortable with X", "writes X", "uses X" (+)
  liking      "likes X" (+) / "dislikes X", "doesn't want X" (-)
  exclusive attributes, one value at a time: preference ("prefers X"), residence ("lives in
  X"), employer ("works at X"), occupation ("works as X"), partner, age, favourite <thing>.
Only a fact's first sentence is read; first-person facts (retained without a speaker) are
read in the third person.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from engine.text import tokenize


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_ADVERBS = (
    r"(?:(?:really|now|still|also|always|usually|often|actually|truly|definitely|generally|"
    r"sometimes|currently|increasingly|finally|clearly|mostly|even|already)\s+)*"
)
_SUBJECT = (
    r"(?:(?:[Tt]he|[Mm]y|[Oo]ur|[Hh]is|[Hh]er|[Tt]heir)\s+\w+"
    r"|[A-Z][\w'’.-]*(?:\s+[A-Z][\w'’.-]*){0,3}|I|We)"
)
PARENTHETICAL = re.compile(r"\s*\([^()]*\)")
_TRAILING_TIME = re.compile(
    r"(?:\s+(?:today|yesterday|tonight|now|lately|recently|again|anymore|any more|nowadays|"
    r"currently|these days|at the moment|this (?:week|month|year)|last (?:week|month|year)))+$",
    re.I,
)
_PREFERENCE_CUT = re.compile(r"\s+(?:over|rather than|instead of|more than)\s+.*$", re.I)
_GENERIC_TERMS = frozenset(
    tokenize("code thing things stuff lot way kind sort today yesterday now time times work")
)
# A relative time expression followed by the absolute date the extractor wrote out:
# "yesterday (7 May 2023)", "last week (1-7 May 2023)".
_DATED = re.compile(
    r"\s*\b(?:(?:today|yesterday|tomorrow|tonight|last \w+|this \w+|next \w+|"
    r"(?:a |\w+ )?(?:days?|weeks?|months?|years?) ago|on \w+day)\s*)?\([^()]*\d{4}[^()]*\)",
    re.I,
)


@dataclass(frozen=True)
class _Predicate:
    aspect: str
    polarity: int
    exclusive: bool
    regex: re.Pattern[str]


def _predicate(aspect: str, polarity: int, exclusive: bool, verbs: str) -> _Predicate:
    regex = re.compile(
        rf"^(?P<subject>{_SUBJECT})\s+{_ADVERBS}(?P<predicate>{verbs})\s+(?P<object>.+)$"
    )
    return _Predicate(aspect, polarity, exclusive, regex)


# Ordered: the first match wins, so negated and longer forms come before the plain ones.
_PREDICATES = (
    _predicate(
        "competence",
        -1,
        False,
        r"(?:struggles|struggled|is struggling|has been struggling|keeps struggling) with"
        r"|(?:has|had|is having) (?:trouble|difficulty|difficulties|a hard time|problems)"
        r" (?:with|understanding|using|writing)"
        r"|(?:is|was) (?:not|never) (?:comfortable|confident|good|familiar) (?:with|at|in)"
        r"|(?:isn't|wasn't) (?:comfortable|confident|good|familiar) (?:with|at|in)"
        r"|(?:is|was) (?:uncomfortable|unfamiliar|bad|terrible|confused|intimidated)"
        r" (?:with|at|by)"
        r"|(?:is|was) (?:new to|afraid of|scared of)"
        r"|(?:does not|doesn't|did not|didn't) (?:understand|get)",
    ),
    _predicate(
        "competence",
        1,
        False,
        r"(?:is|was|has become|became) (?:comfortable|confident|good|great|proficient|fluent"
        r"|skilled|experienced|familiar|at ease) (?:with|at|in)"
        r"|is (?:growing|getting|becoming) (?:more )?(?:comfortable|confident) (?:with|at|in)"
        r"|is an? expert (?:in|at|on)"
        r"|(?:writes|wrote|has written|is writing|uses|used|is using|has used|builds|built"
        r"|has built|is building|ships|shipped|implements|implemented|mastered|has mastered"
        r"|understands|knows|teaches|taught|can write|can use)",
    ),
    _predicate(
        "preference",
        -1,
        True,
        r"(?:no longer prefers|does not prefer|doesn't prefer)",
    ),
    _predicate("preference", 1, True, r"(?:prefers|preferred|would rather have|favou?rs)"),
    _predicate(
        "liking",
        -1,
        False,
        r"(?:dislikes|hates|detests|can't stand|cannot stand|is not a fan of|isn't a fan of"
        r"|(?:does not|doesn't|did not|didn't) (?:like|love|enjoy|want)"
        r"|no longer (?:likes|loves|enjoys|wants))",
    ),
    _predicate(
        "liking",
        1,
        False,
        r"(?:likes|loves|enjoys|adores|is a (?:big )?fan of|is into|is passionate about)",
    ),
    _predicate(
        "residence",
        1,
        True,
        r"(?:lives|is living|resides|is based|now lives) in|(?:moved|relocated|has moved) to",
    ),
    _predicate("occupation", 1, True, r"(?:works|is working|is employed) as(?: an?)?"),
    _predicate(
        "employer", 1, True, r"(?:works|is working|now works) (?:at|for)|is employed (?:by|at)"
    ),
    _predicate("partner", 1, True, r"is (?:married to|engaged to|dating)"),
)
_FINDS = re.compile(
    rf"^(?P<subject>{_SUBJECT})\s+{_ADVERBS}(?P<predicate>finds|found)\s+(?P<object>.+?)\s+"
    r"(?P<judgement>hard|difficult|confusing|intimidating|challenging|tricky|easy|simple|natural)\b"
)
_AGE = re.compile(rf"^(?P<subject>{_SUBJECT})\s+is\s+(?P<object>\d+)\s+years?\s+old\b")
_FAVOURITE = re.compile(
    rf"^(?P<subject>{_SUBJECT})['’]s?\s+(?:favou?rite)\s+(?P<attribute>[a-z]+(?:\s[a-z]+)?)"
    r"\s+is\s+(?P<object>.+)$"
)
_EASY = _words("easy simple natural")
_FIRST_PERSON = re.compile(rf"^(?P<subject>I|We)\s+{_ADVERBS}(?P<verb>[\w'’]+)")
_IRREGULAR = {
    "am": "is",
    "are": "is",
    "were": "was",
    "have": "has",
    "do": "does",
    "don't": "doesn't",
    "don’t": "doesn't",
    "haven't": "hasn't",
    "aren't": "isn't",
}
_UNCHANGED = _words(
    "can could will would should may might must wrote built found knew taught made went did "
    "had was got saw began became felt thought kept left met ran won bought brought spent"
)


@dataclass(frozen=True)
class Claim:
    subject: str  # normalised: casefolded, possessive dropped
    subject_text: str  # as written
    aspect: str
    polarity: int  # +1 or -1
    exclusive: bool
    predicate: str  # as written, e.g. "struggles with"
    object: str  # as written, without dates and trailing time words
    terms: frozenset[str]  # the object's index terms, generic words dropped

    def to_json(self) -> dict[str, Any]:
        return {
            "subject": self.subject,
            "subject_text": self.subject_text,
            "aspect": self.aspect,
            "polarity": self.polarity,
            "exclusive": self.exclusive,
            "predicate": self.predicate,
            "object": self.object,
            "terms": sorted(self.terms),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Claim:
        return cls(
            subject=str(data["subject"]),
            subject_text=str(data["subject_text"]),
            aspect=str(data["aspect"]),
            polarity=int(data["polarity"]),
            exclusive=bool(data["exclusive"]),
            predicate=str(data["predicate"]),
            object=str(data["object"]),
            terms=frozenset(str(t) for t in data["terms"]),
        )


def timeless(text: str) -> str:
    """A fact's text as a belief: without the dated time expressions retain wrote into it
    ("went hiking yesterday (7 May 2023)." → "went hiking.")."""
    cleaned = _DATED.sub("", text).strip()
    cleaned = re.sub(r"\s+([.,;!?])", r"\1", cleaned)
    return cleaned or text.strip()


def _sentence(text: str) -> str:
    first = re.split(r"(?<=[.!?;])\s+", text.strip(), maxsplit=1)[0]
    return first.rstrip(" .!?;")


def _clean_object(raw: str, aspect: str) -> str:
    value = PARENTHETICAL.sub("", raw)
    value = _TRAILING_TIME.sub("", value.strip().rstrip(".!?;, "))
    if aspect == "preference":
        value = _PREFERENCE_CUT.sub("", value)
    return value.strip(" ,")


def _terms(value: str) -> frozenset[str]:
    return frozenset(t for t in tokenize(value) if t not in _GENERIC_TERMS)


def _normal_subject(subject: str) -> str:
    return re.sub(r"['’]s?$", "", subject.strip()).casefold()


def _claim(
    subject: str, aspect: str, polarity: int, exclusive: bool, predicate: str, raw: str
) -> Claim | None:
    value = _clean_object(raw, aspect)
    terms = _terms(value)
    if not value or not terms:
        return None
    return Claim(
        subject=_normal_subject(subject),
        subject_text=subject.strip(),
        aspect=aspect,
        polarity=polarity,
        exclusive=exclusive,
        predicate=predicate,
        object=value,
        terms=terms,
    )


def _third_person(sentence: str) -> str:
    match = _FIRST_PERSON.match(sentence)
    if match is None:
        return sentence
    verb = match["verb"]
    lower = verb.casefold()
    if lower in _IRREGULAR:
        conjugated = _IRREGULAR[lower]
    elif lower in _UNCHANGED or lower.endswith(("ed", "n't", "n’t")):
        conjugated = verb
    elif lower.endswith(("s", "sh", "ch", "x", "z", "o")):
        conjugated = verb + "es"
    elif len(lower) > 1 and lower.endswith("y") and lower[-2] not in "aeiou":
        conjugated = verb[:-1] + "ies"
    else:
        conjugated = verb + "s"
    return sentence[: match.start("verb")] + conjugated + sentence[match.end("verb") :]


def parse_claim(text: str) -> Claim | None:
    """The claim of a fact's first sentence, or None when it is not one we recognise."""
    sentence = _third_person(_sentence(text))
    if not sentence:
        return None
    if match := _FAVOURITE.match(sentence):
        aspect = "favourite " + match["attribute"].casefold()
        return _claim(match["subject"], aspect, 1, True, "is", match["object"])
    if match := _AGE.match(sentence):
        number = match["object"]
        return Claim(
            _normal_subject(match["subject"]),
            match["subject"],
            "age",
            1,
            True,
            "is",
            number,
            frozenset({number}),
        )
    if match := _FINDS.match(sentence):
        polarity = 1 if match["judgement"] in _EASY else -1
        return _claim(
            match["subject"],
            "competence",
            polarity,
            False,
            f"{match['predicate']} {match['object']} {match['judgement']}",
            match["object"],
        )
    for predicate in _PREDICATES:
        if match := predicate.regex.match(sentence):
            return _claim(
                match["subject"],
                predicate.aspect,
                predicate.polarity,
                predicate.exclusive,
                match["predicate"],
                match["object"],
            )
    return None
