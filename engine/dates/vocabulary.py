"""The words and regular-expression fragments time expressions are made of."""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType

ICASE = re.IGNORECASE
# fmt: off
MONTHS = (
    "january", "february", "march", "april", "may", "june", "july", "august", "september",
    "october", "november", "december",
)
# fmt: on
MONTH_NUM = MappingProxyType(
    {**{m: i for i, m in enumerate(MONTHS, 1)}, **{m[:3]: i for i, m in enumerate(MONTHS, 1)}}
    | {"sept": 9}
)
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
WEEKDAY_NUM = MappingProxyType(
    {**{d: i for i, d in enumerate(WEEKDAYS)}, **{d[:3]: i for i, d in enumerate(WEEKDAYS)}}
    | {"tues": 1, "weds": 2, "thur": 3, "thurs": 3}
)
# fmt: off
NUMBER_WORDS = (
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
    "nineteen", "twenty",
)
# fmt: on
SEASON_MONTH = MappingProxyType({"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12})
# Non-English month names, handed to dateparser with their language (English ones excluded).
_FOREIGN_MONTH_NAMES = (
    ("fr", "janvier février mars avril mai juin juillet août septembre octobre novembre décembre"),
    ("de", "januar februar märz april mai juni juli august september oktober november dezember"),
    (
        "es",
        "enero febrero marzo abril mayo junio julio agosto septiembre setiembre octubre "
        "noviembre diciembre",
    ),
    (
        "it",
        "gennaio febbraio marzo aprile maggio giugno luglio agosto settembre ottobre novembre "
        "dicembre",
    ),
    (
        "pt",
        "janeiro fevereiro março abril maio junho julho agosto setembro outubro novembro dezembro",
    ),
    (
        "nl",
        "januari februari maart april mei juni juli augustus september oktober november december",
    ),
)
FOREIGN_MONTHS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        word: tuple(lang for lang, names in _FOREIGN_MONTH_NAMES if word in names.split())
        for _, names in _FOREIGN_MONTH_NAMES
        for word in names.split()
        if word not in MONTHS
    }
)

MONTH_RE = (
    r"(?P<mon>january|february|march|april|(?-i:May)|june|july|august|september|october|"
    r"november|december|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)\.?(?![\w'’])"
)
WEEKDAY_RE = (
    r"(?P<wd>monday|tuesday|wednesday|thursday|friday|saturday|sunday|"
    r"mon|tues|tue|weds|wed|thurs|thur|thu|fri|sat|sun)\.?\b"
)
YEAR_RE = r"(?P<y>(?:19|20)\d{2})(?![\d\w]|[-/.:]\d)"
QTY_ALT = (
    r"\d{1,3}|a\s+few|a\s+couple(?:\s+of)?|couple(?:\s+of)?|several|few|an?|"
    + "|".join(NUMBER_WORDS[1:])
    + r"|thirty|forty|fifty"
)
QTY_RE = r"(?P<qty>" + QTY_ALT + ")"
UNIT_RE = r"(?P<unit>day|week|weekend|month|year)s?"
MOD_RE = (
    r"(?P<mod>early|mid-?|late|(?:the\s+)?(?:very\s+)?(?:end|beginning|start|middle)\s+of|"
    r"(?:the\s+)?(?:first|second|third|fourth|last)\s+week(?:end)?\s+of)"
)
REL_RE = r"(?P<rel>this\s+past|last|this|next|past|previous|coming)"
PREP_RE = (
    r"(?P<prep>in|during|since|until|till|by|through|throughout|from|before|after|around|"
    r"back\s+in|circa|last|this|next)"
)
FUTURE = re.compile(
    r"\b(?:will|won't|shall|gonna|going\s+to|plan(?:s|ned|ning)?\s+(?:to|on)|"
    r"can't\s+wait|looking\s+forward|upcoming|hope\s+to|about\s+to|next|how\s+about|"
    r"sounds?\s+good|works?\s+for|let's|see\s+you)\b|['’]ll\b|"
    # "I'm going camping", "we're going fishing": the present of a plan ("were going" is not).
    r"(?:\b(?:am|are|is)|['’](?:m|re|s))\s+going\s+\w+ing\b",
    ICASE,
)
SENTENCE_END = re.compile(r"[.!?\n]")
