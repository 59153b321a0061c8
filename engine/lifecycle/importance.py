"""Importance in [0, 1] at write time (docs/lifecycle.md).

The `llm` extractor asks the model for 1-10 and scales it with `from_scale`; the `local`
extractor scores the fact's text with deterministic cues:

    importance = clamp(0.4 + Σ raises − Σ lowers, 0.05, 1.0)

raises: preference +0.25, decision/commitment/plan +0.25, identity (name, job, home, family,
health and who treats it, identity documents, a standing role: plays the cello, member of,
speaks …) +0.2, a named entity +0.05 each (at most 2), a date +0.05, a number +0.05;
lowers: greeting or thanks −0.3, filler/small talk −0.2, a question −0.2. English and Chinese
cues. The weights are a starting point, chosen so small talk lands below the default archive
threshold's reach within weeks (0.1 after ~130 days at 0.99/day from 0.27) while a stated
preference (≥ 0.65) keeps above it for half a year.
"""

from __future__ import annotations

import re

BASE = 0.4

_PREFERENCE = re.compile(
    r"\b(prefer\w*|like[sd]?|love[sd]?|hate[sd]?|dislike[sd]?|favou?rite|enjoy\w*|"
    r"rather|want[s]? (?:me|you|answers|it)|allergic|vegetarian|vegan)\b"
    r"|\b(?:keep|give me|make)\b.*\b(?:answers?|responses?|replies|detail|steps?)\b"
    r"|喜欢|讨厌|偏好|最爱|不喜欢|过敏|希望",
    re.IGNORECASE,
)
_DECISION = re.compile(
    r"\b(decided|decide[s]?|will|going to|plan(?:s|ned|ning)?|promise[sd]?|commit\w*|"
    r"agreed|deadline|must|always|never|from now on|starting)\b"
    r"|决定|计划|打算|答应|承诺|必须|以后|从现在起|现在|改为|不再",
    re.IGNORECASE,
)
_IDENTITY = re.compile(
    r"\b(my name|named|works? (?:at|for|as)|job|employer|joined|moved to|lives? in|"
    r"born|married|wife|husband|daughter|son|mother|father|sister|brother|birthday|"
    r"diagnosed|address|phone|email|"
    r"doctor|dentist|therapist|medication|allerg\w*|passport|visa|insurance|"
    r"plays? (?:the|in)|member of|speaks|studies)\b"
    r"|名字|叫|工作|公司|住在|搬到|出生|结婚|妻子|丈夫|女儿|儿子|生日|换到"
    r"|医生|药|护照|签证|保险",
    re.IGNORECASE,
)
_GREETING = re.compile(
    r"^\W*(hi|hello|hey|good (?:morning|afternoon|evening|night)|thanks?|thank you|bye|"
    r"goodbye|see you|cheers)\b|^\W*(你好|谢谢|再见|早上好|晚安)",
    re.IGNORECASE,
)
_FILLER = re.compile(
    r"\b(weather|lol|haha|ok(?:ay)?|cool|nice|great|awesome|sounds good|how are you|"
    r"not much|just chatting)\b|天气|哈哈|好的|不错",
    re.IGNORECASE,
)
_NUMBER = re.compile(r"\d")
_DATE = re.compile(
    r"\b(\d{4}|january|february|march|april|may|june|july|august|september|october|"
    r"november|december|monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b|\d+月|\d+日",
    re.IGNORECASE,
)


def clamp(value: float, low: float = 0.0, high: float = 1.0) -> float:
    return max(low, min(high, value))


def from_scale(value: float | int | None) -> float | None:
    """The model's 1-10 as [0, 1] (1 → 0.1, 10 → 1.0); None when it gave none."""
    if value is None:
        return None
    return round(clamp(float(value), 1.0, 10.0) / 10.0, 3)


def local_importance(text: str, entity_count: int = 0) -> float:
    """Deterministic importance of one fact's text (see the module docstring)."""
    score = BASE
    if _PREFERENCE.search(text):
        score += 0.25
    if _DECISION.search(text):
        score += 0.25
    if _IDENTITY.search(text):
        score += 0.2
    score += 0.05 * min(entity_count, 2)
    if _DATE.search(text) or _NUMBER.search(text):
        score += 0.05
    if _GREETING.search(text):
        score -= 0.3
    if _FILLER.search(text):
        score -= 0.2
    if text.rstrip().endswith(("?", "？")):
        score -= 0.2
    return round(clamp(score, 0.05, 1.0), 3)
