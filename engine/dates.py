"""Resolve time expressions in text to absolute day ranges, relative to a reference instant.

Every range is a whole number of days and **half-open**: `[start, end)`, both at midnight in
the reference's timezone (a naive reference is treated as UTC). "yesterday" written at
2023-05-08T13:56Z is `[2023-05-07T00:00Z, 2023-05-08T00:00Z)`.

Relative expressions are resolved by the rules below, because `dateparser` returns single
points; it is only asked about non-English absolute dates ("8 mai 2023", "junio de 2022") that
a cheap regex has already found, as one call costs milliseconds (seconds when it must guess
the language).

Conventions (chosen so that stored ranges and query windows agree):
- "last week" is the 7 days before the reference day (written Sat 3 May 2025: 26 Apr–2 May);
  "next week" the 7 days after it; "this week" the Monday–Sunday calendar week.
- "N weeks ago" is the 7-day block ending 7·(N-1) days before the reference day, so "one week
  ago" equals "last week"; "N days ago" is one day; months and years are calendar periods.
  Fuzzy counts widen the window: "a couple" 2–3, "a few" 2–4, "several" 3–7.
- "last weekend" is the most recent Saturday–Sunday that ended before the reference day;
  "this weekend" the one of the current calendar week; "next weekend" the one after that.
- "last <weekday>" is 1–7 days back, "next <weekday>" 1–7 days ahead. "on Friday" / "Friday"
  (capitalised) is the most recent past one (1–7 days back) unless the sentence speaks of the
  future ("will", "'ll", "going to", "how about" ...), then the next one; "this Friday" is
  0–6 days back, or 0–6 days ahead in a future sentence.
- A month or day without a year ("in May", "on 8 May") is the most recent one on or before the
  reference, or the next one on or after it when the sentence speaks of the future.
- Seasons are northern meteorological: spring Mar–May, summer Jun–Aug, autumn/fall Sep–Nov,
  winter Dec–Feb, named by the year it starts ("winter 2022" is Dec 2022–Feb 2023).
  "last spring" is the most recent spring that ended on or before the reference day.
- "8/5/2023" is read US style (month/day) unless the first number exceeds 12; "8.5.2023" is
  day.month. Two-number forms ("8/5") and bare numbers are never dates; bare years only count
  after a preposition ("in 2022", "since 2016"), except in `parse_query_window`.
- "early/mid/late X", "the end of X" split X into thirds (by months for a year or season,
  by days for a month); "first/last week(end) of X" pick that week or weekend. Decades
  ("the 1990s") and clock times are not handled.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from types import MappingProxyType

import dateparser


@dataclass(frozen=True)
class TimeSpan:
    """A resolved range `[start, end)` and where its expression sits in the text."""

    start: datetime
    end: datetime  # exclusive: midnight after the last day of the range
    expression: str
    char_start: int
    char_end: int

    def label(self) -> str:
        """The range in words ("7 May 2023", "March–May 2024"), to make fact text findable."""
        return _label(self.start.date(), self.end.date())


DayRange = tuple[date, date]


@dataclass(frozen=True)
class _Ctx:
    text: str
    ref: date


_Resolver = Callable[[re.Match[str], _Ctx], DayRange | None]

_I = re.IGNORECASE
# fmt: off
_MONTHS = (
    "january", "february", "march", "april", "may", "june", "july", "august", "september",
    "october", "november", "december",
)
# fmt: on
_MONTH_NUM = MappingProxyType(
    {**{m: i for i, m in enumerate(_MONTHS, 1)}, **{m[:3]: i for i, m in enumerate(_MONTHS, 1)}}
    | {"sept": 9}
)
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_WEEKDAY_NUM = MappingProxyType(
    {**{d: i for i, d in enumerate(_WEEKDAYS)}, **{d[:3]: i for i, d in enumerate(_WEEKDAYS)}}
    | {"tues": 1, "weds": 2, "thur": 3, "thurs": 3}
)
# fmt: off
_NUMBER_WORDS = (
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
    "nineteen", "twenty",
)
# fmt: on
_SEASON_MONTH = MappingProxyType({"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12})
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
_FOREIGN_MONTHS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        word: tuple(lang for lang, names in _FOREIGN_MONTH_NAMES if word in names.split())
        for _, names in _FOREIGN_MONTH_NAMES
        for word in names.split()
        if word not in _MONTHS
    }
)

_MONTH_RE = (
    r"(?P<mon>january|february|march|april|(?-i:May)|june|july|august|september|october|"
    r"november|december|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)\.?(?![\w'’])"
)
_WEEKDAY_RE = (
    r"(?P<wd>monday|tuesday|wednesday|thursday|friday|saturday|sunday|"
    r"mon|tues|tue|weds|wed|thurs|thur|thu|fri|sat|sun)\.?\b"
)
_YEAR_RE = r"(?P<y>(?:19|20)\d{2})(?![\d\w]|[-/.:]\d)"
_QTY_ALT = (
    r"\d{1,3}|a\s+few|a\s+couple(?:\s+of)?|couple(?:\s+of)?|several|few|an?|"
    + "|".join(_NUMBER_WORDS[1:])
    + r"|thirty|forty|fifty"
)
_QTY_RE = r"(?P<qty>" + _QTY_ALT + ")"
_UNIT_RE = r"(?P<unit>day|week|weekend|month|year)s?"
_MOD_RE = (
    r"(?P<mod>early|mid-?|late|(?:the\s+)?(?:very\s+)?(?:end|beginning|start|middle)\s+of|"
    r"(?:the\s+)?(?:first|second|third|fourth|last)\s+week(?:end)?\s+of)"
)
_REL_RE = r"(?P<rel>this\s+past|last|this|next|past|previous|coming)"
_PREP_RE = (
    r"(?P<prep>in|during|since|until|till|by|through|throughout|from|before|after|around|"
    r"back\s+in|circa|last|this|next)"
)
_FUTURE = re.compile(
    r"\b(?:will|won't|shall|gonna|going\s+to|plan(?:s|ned|ning)?\s+(?:to|on)|"
    r"can't\s+wait|looking\s+forward|upcoming|hope\s+to|about\s+to|next|how\s+about|"
    r"sounds?\s+good|works?\s+for|let's|see\s+you)\b|['’]ll\b",
    _I,
)
_SENTENCE_END = re.compile(r"[.!?\n]")


# --------------------------------------------------------------------------- day arithmetic


def _add_months(d: date, k: int) -> date:
    """The first day of the month `k` months after `d`'s month."""
    y, m = divmod(d.year * 12 + d.month - 1 + k, 12)
    return date(y, m + 1, 1)


def _shift_months(d: date, k: int) -> date:
    """`d` moved by `k` months, the day clamped to the target month's length."""
    first = _add_months(d, k)
    return first.replace(day=min(d.day, calendar.monthrange(first.year, first.month)[1]))


def _month(y: int, m: int) -> DayRange:
    start = date(y, m, 1)
    return start, _add_months(start, 1)


def _year(y: int) -> DayRange:
    return date(y, 1, 1), date(y + 1, 1, 1)


def _day(d: date) -> DayRange:
    return d, d + timedelta(days=1)


def _season(name: str, y: int) -> DayRange:
    start = date(y, _SEASON_MONTH[name], 1)
    return start, _add_months(start, 3)


def _last_weekend(ref: date) -> date:
    """The Saturday of the most recent weekend that ended before `ref`."""
    saturday = ref - timedelta(days=(ref.weekday() - 5) % 7)
    return saturday if saturday + timedelta(days=2) <= ref else saturday - timedelta(days=7)


def _apply_mod(mod: str | None, rng: DayRange) -> DayRange:
    """Narrow a range by a modifier: thirds by days, or an ordinal week / weekend."""
    if not mod:
        return rng
    start, end = rng
    mod = " ".join(mod.lower().replace("the ", "").replace("very ", "").split())
    months = (end.year - start.year) * 12 + end.month - start.month
    whole_months = start.day == end.day == 1 and months % 3 == 0
    cuts = (
        [_add_months(start, months * k // 3) for k in (1, 2)]  # a year: Jan–Apr, May–Aug, ...
        if whole_months
        else [start + timedelta(days=(end - start).days * k // 3) for k in (1, 2)]
    )
    if mod.startswith(("early", "beginning", "start")):
        return start, cuts[0]
    if mod.startswith(("mid", "middle")):
        return cuts[0], cuts[1]
    if mod.startswith(("late", "end")):
        return cuts[1], end
    first_word = mod.split()[0]
    ordinal = (
        -1 if first_word == "last" else ("first", "second", "third", "fourth").index(first_word)
    )
    if "weekend" in mod:
        if ordinal < 0:
            last_day = end - timedelta(days=1)
            saturday = last_day - timedelta(days=(last_day.weekday() - 5) % 7)
        else:
            saturday = start + timedelta(days=(5 - start.weekday()) % 7 + 7 * ordinal)
        return saturday, saturday + timedelta(days=2)
    if ordinal < 0:
        return end - timedelta(days=7), end
    return start + timedelta(days=7 * ordinal), start + timedelta(days=7 * ordinal + 7)


def _quantity(raw: str) -> tuple[int, int]:
    q = " ".join(raw.lower().split())
    if q.isdigit():
        return int(q), int(q)
    if q in ("a", "an"):
        return 1, 1
    if "couple" in q:
        return 2, 3
    if "few" in q:
        return 2, 4
    if q == "several":
        return 3, 7
    tens = {"thirty": 30, "forty": 40, "fifty": 50}
    n = tens[q] if q in tens else _NUMBER_WORDS.index(q)
    return n, n


def _is_future(m: re.Match[str], ctx: _Ctx) -> bool:
    """Whether the sentence around the match speaks of the future (a deterministic cue)."""
    text = ctx.text
    before = [x.end() for x in _SENTENCE_END.finditer(text, 0, m.start())]
    after = _SENTENCE_END.search(text, m.end())
    sentence = text[before[-1] if before else 0 : after.start() if after else len(text)]
    return _FUTURE.search(sentence) is not None


# --------------------------------------------------------------------------- resolvers


def _r_dayword(m: re.Match[str], ctx: _Ctx) -> DayRange | None:
    w = " ".join(m.group(0).lower().split())
    ref = ctx.ref
    if "before yesterday" in w:
        return _day(ref - timedelta(days=2))
    if "after tomorrow" in w:
        return _day(ref + timedelta(days=2))
    if w in ("yesterday", "last night"):
        return _day(ref - timedelta(days=1))
    if w in ("tomorrow", "tmrw", "tmr", "tomorrow night"):
        return _day(ref + timedelta(days=1))
    if w == "the other day":
        return ref - timedelta(days=7), ref
    return _day(ref)  # today, tonight, this morning/afternoon/evening


def _r_rel_unit(m: re.Match[str], ctx: _Ctx) -> DayRange | None:
    rel = " ".join(m.group("rel").lower().split())
    rel = {"this past": "last", "past": "last", "previous": "last", "coming": "next"}.get(rel, rel)
    unit, ref = m.group("unit").lower(), ctx.ref
    rng: DayRange
    if unit == "week":
        monday = ref - timedelta(days=ref.weekday())
        rng = {
            "last": (ref - timedelta(days=7), ref),
            "this": (monday, monday + timedelta(days=7)),
            "next": (ref + timedelta(days=1), ref + timedelta(days=8)),
        }[rel]
    elif unit == "weekend":
        this_sat = ref - timedelta(days=ref.weekday()) + timedelta(days=5)
        sat = {
            "last": _last_weekend(ref),
            "this": this_sat,
            "next": this_sat + timedelta(days=7),
        }[rel]
        rng = sat, sat + timedelta(days=2)
    elif unit == "month":
        start = _add_months(ref, {"last": -1, "this": 0, "next": 1}[rel])
        rng = start, _add_months(start, 1)
    else:
        rng = _year(ref.year + {"last": -1, "this": 0, "next": 1}[rel])
    edge = (m.group("edge") or "").lower()
    if rel == "this" and edge == "earlier":
        return rng[0], min(rng[1], ref + timedelta(days=1))
    if rel == "this" and edge == "later":
        return max(rng[0], ref), rng[1]
    return rng


def _r_ago(m: re.Match[str], ctx: _Ctx) -> DayRange | None:
    lo, hi = _quantity(m.group("qty"))
    unit, ref = m.group("unit").lower(), ctx.ref
    if unit == "day":
        return ref - timedelta(days=hi), ref - timedelta(days=lo - 1)
    if unit == "week":
        return ref - timedelta(days=7 * hi), ref - timedelta(days=7 * lo - 7)
    if unit == "weekend":
        sat = _last_weekend(ref)
        return sat - timedelta(days=7 * (hi - 1)), sat - timedelta(days=7 * (lo - 1) - 2)
    if unit == "month":
        return _add_months(ref, -hi), _add_months(ref, -lo + 1)
    return date(ref.year - hi, 1, 1), date(ref.year - lo + 1, 1, 1)


def _r_in(m: re.Match[str], ctx: _Ctx) -> DayRange | None:
    """ "in two days", "three weeks from now": the future mirror of `_r_ago`."""
    lo, hi = _quantity(m.group("qty"))
    unit, ref = m.group("unit").lower(), ctx.ref
    if m.group(0).lower().split()[-2:] == ["a", "day"]:
        return None  # "Rome wasn't built in a day"
    if unit == "day":
        return ref + timedelta(days=lo), ref + timedelta(days=hi + 1)
    if unit == "week":
        return ref + timedelta(days=7 * lo - 6), ref + timedelta(days=7 * hi + 1)
    if unit == "month":
        return _add_months(ref, lo), _add_months(ref, hi + 1)
    if unit == "year":
        return date(ref.year + lo, 1, 1), date(ref.year + hi + 1, 1, 1)
    return None


def _r_past_n(m: re.Match[str], ctx: _Ctx) -> DayRange | None:
    """Rolling window ending with the reference day: "the past two weeks"."""
    _, hi = _quantity(m.group("qty") or m.group("n") or "1")
    unit, ref = m.group("unit").lower(), ctx.ref
    end = ref + timedelta(days=1)
    if unit in ("day", "week", "weekend"):
        return ref - timedelta(days=hi * (1 if unit == "day" else 7)), end
    return _shift_months(ref, -hi * (1 if unit == "month" else 12)), end


def _r_weekday(m: re.Match[str], ctx: _Ctx) -> DayRange | None:
    raw_wd = m.group("wd")
    wd, ref = _WEEKDAY_NUM[raw_wd.lower()], ctx.ref
    rel = " ".join((m.group("rel") or "").lower().split())
    abbreviated = raw_wd.lower() not in _WEEKDAYS
    if abbreviated and (not rel or (rel == "on" and not raw_wd[0].isupper())):
        return None  # "Sat", "sun", "on sun loungers"
    if not rel and not raw_wd[0].isupper():
        return None  # "sunday school" in lower case is a noun phrase, not a date
    if not rel and re.search(r"\b(?:every|each)\s+$", ctx.text[max(0, m.start() - 8) : m.start()]):
        return None  # habitual, not a date
    back = (ref.weekday() - wd - 1) % 7 + 1
    ahead = (wd - ref.weekday() - 1) % 7 + 1
    if rel in ("last", "past", "previous", "this past"):
        return _day(ref - timedelta(days=back))
    if rel in ("next", "coming"):
        return _day(ref + timedelta(days=ahead))
    future = _is_future(m, ctx)
    if rel == "this":  # "this Tuesday": today or the coming one, unless told of as past
        shift = (wd - ref.weekday()) % 7 if future else -((ref.weekday() - wd) % 7)
        return _day(ref + timedelta(days=shift))
    if future:
        return _day(ref + timedelta(days=ahead))
    return _day(ref - timedelta(days=back))


def _month_year(m: re.Match[str], ctx: _Ctx, rel: str) -> int:
    """The year of a month named without one, per the module conventions."""
    month, ref = _MONTH_NUM[m.group("mon").lower().rstrip(".")], ctx.ref
    if rel == "last":
        return ref.year if month < ref.month else ref.year - 1
    if rel == "next":
        return ref.year if month > ref.month else ref.year + 1
    if rel == "this":
        return ref.year
    if rel != "since" and _is_future(m, ctx):
        return ref.year if month >= ref.month else ref.year + 1
    return ref.year if month <= ref.month else ref.year - 1


def _r_month(m: re.Match[str], ctx: _Ctx) -> DayRange | None:
    prep = " ".join((m.group("prep") or "").lower().split())
    mod = m.group("mod")
    if not prep and not mod:
        return None  # a bare month name: "May" is usually the verb
    month = _MONTH_NUM[m.group("mon").lower().rstrip(".")]
    return _apply_mod(mod, _month(_month_year(m, ctx, prep), month))


def _r_month_span(m: re.Match[str], ctx: _Ctx) -> DayRange | None:
    """ "June to August 2023": the first month takes the year of the second."""
    first, last = (_MONTH_NUM[m.group(g).lower().rstrip(".")] for g in ("mon", "mon2"))
    year = int(m.group("y"))
    start = date(year - 1 if first > last else year, first, 1)
    return start, _add_months(date(year, last, 1), 1)


def _r_month_year(m: re.Match[str], ctx: _Ctx) -> DayRange | None:
    month = _MONTH_NUM[m.group("mon").lower().rstrip(".")]
    return _apply_mod(m.group("mod"), _month(int(m.group("y")), month))


def _r_day_month(m: re.Match[str], ctx: _Ctx) -> DayRange | None:
    raw_month = m.group("mon")
    month, day = _MONTH_NUM[raw_month.lower().rstrip(".")], int(m.group("d"))
    if m.group("y"):
        year = int(m.group("y"))
    elif not raw_month[0].isupper():
        return None  # "they march 5 miles"
    else:
        ref = ctx.ref
        future = _is_future(m, ctx)
        year = ref.year
        if future and (month, day) < (ref.month, ref.day):
            year += 1
        elif not future and (month, day) > (ref.month, ref.day):
            year -= 1
    if not 1 <= day <= calendar.monthrange(year, month)[1]:
        return None
    return _day(date(year, month, day))


def _r_iso(m: re.Match[str], ctx: _Ctx) -> DayRange | None:
    return _valid_day(int(m.group("y")), int(m.group("a")), int(m.group("b")))


def _r_numeric(m: re.Match[str], ctx: _Ctx) -> DayRange | None:
    """8/5/2023 is US month/day unless the first number exceeds 12; 8.5.2023 is day.month."""
    a, b, year = int(m.group("a")), int(m.group("b")), int(m.group("y"))
    if m.group("sep") == "." or a > 12:
        return _valid_day(year, b, a)
    return _valid_day(year, a, b)


def _valid_day(year: int, month: int, day: int) -> DayRange | None:
    if not (1 <= month <= 12 and 1 <= day <= calendar.monthrange(year, month)[1]):
        return None
    return _day(date(year, month, day))


def _r_year(m: re.Match[str], ctx: _Ctx) -> DayRange | None:
    if not m.group("prep") and not m.group("mod"):
        return None
    return _apply_mod(m.group("mod"), _year(int(m.group("y"))))


def _r_season_rel(m: re.Match[str], ctx: _Ctx) -> DayRange | None:
    rel = " ".join(m.group("rel").lower().split())
    name, ref = m.group("s").lower(), ctx.ref
    years = [_season(name, y) for y in range(ref.year - 2, ref.year + 2)]
    if rel in ("last", "past", "previous", "this past"):
        return max(r for r in years if r[1] <= ref)
    if rel in ("next", "coming"):
        return min(r for r in years if r[0] > ref)
    containing = [r for r in years if r[0] <= ref < r[1]]
    if containing:
        return containing[0]
    return _season(name, ref.year)


def _r_season_year(m: re.Match[str], ctx: _Ctx) -> DayRange | None:
    return _apply_mod(m.group("mod"), _season(m.group("s").lower(), int(m.group("y"))))


def _r_foreign(m: re.Match[str], ctx: _Ctx) -> DayRange | None:
    languages = _FOREIGN_MONTHS.get(m.group("w").lower())
    if not languages:
        return None
    day = m.group("d")
    parsed = dateparser.parse(
        m.group(0),
        languages=list(languages),
        settings={
            "REQUIRE_PARTS": ["day", "month", "year"] if day else ["month", "year"],
            "PREFER_DAY_OF_MONTH": "first",
            "RELATIVE_BASE": datetime(ctx.ref.year, ctx.ref.month, ctx.ref.day),
        },
    )
    if parsed is None:
        return None
    return _day(parsed.date()) if day else _month(parsed.year, parsed.month)


_RULES: tuple[tuple[re.Pattern[str], _Resolver], ...] = (
    (
        re.compile(
            r"(?<![\d/.-])(?P<y>(?:19|20)\d{2})(?P<sep>[-/])(?P<a>\d{1,2})(?P=sep)(?P<b>\d{1,2})"
            r"(?!\d)"
        ),
        _r_iso,
    ),
    (
        re.compile(
            r"(?<![\d/.-])(?P<a>\d{1,2})(?P<sep>[/.])(?P<b>\d{1,2})(?P=sep)(?P<y>(?:19|20)\d{2})"
            r"(?!\d)"
        ),
        _r_numeric,
    ),
    (
        re.compile(
            r"\b(?:the\s+)?(?P<d>\d{1,2})(?:st|nd|rd|th)?(?:\s+of)?\s+"
            + _MONTH_RE
            + r"(?:,?\s+"
            + _YEAR_RE
            + ")?",
            _I,
        ),
        _r_day_month,
    ),
    (
        re.compile(
            r"\b"
            + _MONTH_RE
            + r"\s+(?:the\s+)?(?P<d>\d{1,2})(?:st|nd|rd|th)?(?![\d:])\b(?:,?\s+"
            + _YEAR_RE
            + ")?",
            _I,
        ),
        _r_day_month,
    ),
    (
        re.compile(
            r"\b(?:between\s+|from\s+)?"
            + _MONTH_RE
            + r"\s*(?:-|–|to|till|until|through|and)\s*"
            + _MONTH_RE.replace("<mon>", "<mon2>")
            + r",?\s+(?:of\s+)?"
            + _YEAR_RE,
            _I,
        ),
        _r_month_span,
    ),
    (
        re.compile(r"\b(?:" + _MOD_RE + r"\s*)?" + _MONTH_RE + r",?\s+(?:of\s+)?" + _YEAR_RE, _I),
        _r_month_year,
    ),
    (
        re.compile(r"\b(?:" + _PREP_RE + r"\s+)?(?:" + _MOD_RE + r"\s*)?" + _MONTH_RE, _I),
        _r_month,
    ),
    (
        re.compile(
            r"\b(?:" + _PREP_RE + r"\s+)?(?:" + _MOD_RE + r"\s*)?(?:the\s+year\s+)?" + _YEAR_RE,
            _I,
        ),
        _r_year,
    ),
    (
        re.compile(r"\b" + _REL_RE + r"\s+(?P<s>spring|summer|autumn|fall|winter)\b", _I),
        _r_season_rel,
    ),
    (
        re.compile(
            r"\b(?:"
            + _MOD_RE
            + r"\s*)?(?:the\s+)?(?P<s>spring|summer|autumn|fall|winter),?\s+(?:of\s+)?"
            + _YEAR_RE,
            _I,
        ),
        _r_season_year,
    ),
    (
        re.compile(
            r"\b(?:the\s+day\s+before\s+yesterday|the\s+day\s+after\s+tomorrow|yesterday|today|"
            r"tonight|tomorrow(?:\s+night)?|tmrw|tmr|last\s+night|the\s+other\s+day|"
            r"this\s+(?:morning|afternoon|evening))\b",
            _I,
        ),
        _r_dayword,
    ),
    (
        re.compile(
            r"\b(?:(?P<edge>earlier|later)\s+)?"
            + _REL_RE
            + r"\s+(?P<unit>week|weekend|month|year)\b",
            _I,
        ),
        _r_rel_unit,
    ),
    (
        re.compile(
            r"\b(?:(?P<rel>this\s+past|last|next|this|on|past|previous|coming)\s+)?" + _WEEKDAY_RE,
            _I,
        ),
        _r_weekday,
    ),
    (re.compile(r"\b" + _QTY_RE + r"\s+" + _UNIT_RE + r"\s+ago\b", _I), _r_ago),
    (
        re.compile(
            r"\bin\s+(?:about\s+|around\s+|another\s+)?" + _QTY_RE + r"\s+" + _UNIT_RE + r"\b",
            _I,
        ),
        _r_in,
    ),
    (re.compile(r"\b" + _QTY_RE + r"\s+" + _UNIT_RE + r"\s+from\s+(?:now|today)\b", _I), _r_in),
    (
        re.compile(
            r"\b(?:the\s+|these\s+)?(?:past\s+(?:"
            + _QTY_RE
            + r"\s+)?|(?:last|previous)\s+(?P<n>(?!an?\b)(?:"
            + _QTY_ALT
            + r"))\s+)"
            + _UNIT_RE
            + r"\b",
            _I,
        ),
        _r_past_n,
    ),
    (
        re.compile(
            r"(?<![\w.])(?:(?P<d>\d{1,2})\.?\s+(?:de\s+)?)?(?P<w>[^\W\d_]{3,})\.?\s+"
            r"(?:de\s+|del\s+)?" + _YEAR_RE
        ),
        _r_foreign,
    ),
)
# One cheap scan decides whether the rules above need to run at all (most sentences: no).
_PREFILTER = re.compile(
    r"\d|\b(?:yesterday|today|tonight|tomorrow|tmrw?|ago|other\s+day|"
    r"(?:last|this|next|past|previous|coming|on)\s+(?:\w+\s+){0,2}?(?:week|month|year|night|"
    r"morning|afternoon|evening|day|spring|summer|autumn|fall|winter|mon|tue|wed|thu|fri|sat|"
    r"sun|jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec|few|couple|several)\w*|"
    r"from\s+now|in\s+(?:about\s+|around\s+|another\s+)?(?:an?|few|couple|several|"
    + "|".join(_NUMBER_WORDS[1:])
    + r"|thirty|forty|fifty)|"
    r"(?:mon|tues|wednes|thurs|fri|satur|sun)day|spring|summer|autumn|fall|winter|january|"
    r"february|march|april|june|july|august|september|october|november|december|"
    r"jan|feb|mar|apr|jun|jul|aug|sept?|oct|nov|dec)\b|(?-i:May\b)",
    _I,
)


def find_time_spans(text: str, reference: datetime) -> list[TimeSpan]:
    """Every time expression in `text`, resolved against `reference`, in text order.

    Of overlapping candidates the longest wins ("in June 2023" is June 2023, not "in June").
    """
    if not _PREFILTER.search(text):
        return []
    ref_dt = reference if reference.tzinfo is not None else reference.replace(tzinfo=UTC)
    ctx = _Ctx(text=text, ref=ref_dt.date())
    found: list[tuple[int, int, DayRange]] = []
    for pattern, resolve in _RULES:
        for m in pattern.finditer(text):
            rng = resolve(m, ctx)
            if rng is not None and rng[0] < rng[1]:
                found.append((m.start(), m.end(), rng))
    found.sort(key=lambda f: (f[0] - f[1], f[0]))
    kept: list[tuple[int, int, DayRange]] = []
    for cand in found:
        if all(cand[1] <= k[0] or k[1] <= cand[0] for k in kept):
            kept.append(cand)
    spans: list[TimeSpan] = []
    for start, end, (first, after) in sorted(kept, key=lambda f: f[0]):
        spans.append(
            TimeSpan(
                start=_midnight(first, ref_dt),
                end=_midnight(after, ref_dt),
                expression=text[start:end],
                char_start=start,
                char_end=end,
            )
        )
    return spans


def merge_spans(spans: Sequence[TimeSpan], text: str) -> TimeSpan | None:
    """One window for several spans: the narrowest when it lies inside all the others
    (the most specific), else their union ("from June to August 2023")."""
    if not spans:
        return None
    narrowest = min(spans, key=lambda s: (s.end - s.start, s.char_start))
    if all(s.start <= narrowest.start and narrowest.end <= s.end for s in spans):
        return narrowest
    char_start = min(s.char_start for s in spans)
    char_end = max(s.char_end for s in spans)
    return TimeSpan(
        start=min(s.start for s in spans),
        end=max(s.end for s in spans),
        expression=text[char_start:char_end],
        char_start=char_start,
        char_end=char_end,
    )


_BARE_YEAR = re.compile(r"(?<![\w.$£€])" + _YEAR_RE)


def parse_query_window(query: str, reference: datetime) -> TimeSpan | None:
    """The single best time window of a search query, or None when it names no time.

    Unlike text, a query's bare year counts ("Caroline pride parade 2022").
    """
    spans = find_time_spans(query, reference)
    if not spans:
        ref_dt = reference if reference.tzinfo is not None else reference.replace(tzinfo=UTC)
        spans = [
            TimeSpan(
                start=_midnight(date(int(m.group("y")), 1, 1), ref_dt),
                end=_midnight(date(int(m.group("y")) + 1, 1, 1), ref_dt),
                expression=m.group(0),
                char_start=m.start(),
                char_end=m.end(),
            )
            for m in _BARE_YEAR.finditer(query)
        ]
    return merge_spans(spans, query)


def _midnight(d: date, ref: datetime) -> datetime:
    return datetime(d.year, d.month, d.day, tzinfo=ref.tzinfo)


def _label(first: date, after: date) -> str:
    last = after - timedelta(days=1)

    def day(d: date) -> str:
        return f"{d.day} {calendar.month_name[d.month]}"

    if first == last:
        return f"{day(first)} {first.year}"
    whole_months = first.day == 1 and after.day == 1
    if whole_months and (first.month, after.month) == (1, 1) and after.year == first.year + 1:
        return str(first.year)
    if whole_months:
        a, b = calendar.month_name[first.month], calendar.month_name[last.month]
        if (first.year, first.month) == (last.year, last.month):
            return f"{a} {first.year}"
        if first.year == last.year:
            return f"{a}–{b} {first.year}"
        return f"{a} {first.year}–{b} {last.year}"
    if (first.year, first.month) == (last.year, last.month):
        return f"{first.day}–{day(last)} {first.year}"
    if first.year == last.year:
        return f"{day(first)}–{day(last)} {first.year}"
    return f"{day(first)} {first.year}–{day(last)} {last.year}"
