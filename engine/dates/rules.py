"""The rules: one regular expression per kind of time expression, each with a resolver that
turns a match into a day range relative to the reference day."""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta

import dateparser

from engine.dates.days import (
    DayRange,
    add_months,
    ago,
    ahead,
    apply_mod,
    day_range,
    last_weekend,
    month_range,
    quantity,
    season_range,
    shift_months,
    year_range,
)
from engine.dates.vocabulary import (
    FOREIGN_MONTHS,
    FUTURE,
    ICASE,
    MOD_RE,
    MONTH_NUM,
    MONTH_RE,
    NUMBER_WORDS,
    PREP_RE,
    QTY_ALT,
    QTY_RE,
    REL_RE,
    SENTENCE_END,
    UNIT_RE,
    WEEKDAY_NUM,
    WEEKDAY_RE,
    WEEKDAYS,
    YEAR_RE,
)


@dataclass(frozen=True)
class Context:
    text: str
    ref: date


Rule = Callable[[re.Match[str], Context], DayRange | None]


def _is_future(m: re.Match[str], ctx: Context) -> bool:
    """Whether the sentence around the match speaks of the future (a deterministic cue)."""
    text = ctx.text
    before = [x.end() for x in SENTENCE_END.finditer(text, 0, m.start())]
    after = SENTENCE_END.search(text, m.end())
    sentence = text[before[-1] if before else 0 : after.start() if after else len(text)]
    return FUTURE.search(sentence) is not None


def _r_dayword(m: re.Match[str], ctx: Context) -> DayRange | None:
    w = " ".join(m.group(0).lower().split())
    ref = ctx.ref
    if "before yesterday" in w:
        return day_range(ref - timedelta(days=2))
    if "after tomorrow" in w:
        return day_range(ref + timedelta(days=2))
    if w in ("yesterday", "last night"):
        return day_range(ref - timedelta(days=1))
    if w in ("tomorrow", "tmrw", "tmr", "tomorrow night"):
        return day_range(ref + timedelta(days=1))
    if w == "the other day":
        return ref - timedelta(days=7), ref
    return day_range(ref)  # today, tonight, this morning/afternoon/evening


def _r_rel_unit(m: re.Match[str], ctx: Context) -> DayRange | None:
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
            "last": last_weekend(ref),
            "this": this_sat,
            "next": this_sat + timedelta(days=7),
        }[rel]
        rng = sat, sat + timedelta(days=2)
    elif unit == "month":
        start = add_months(ref, {"last": -1, "this": 0, "next": 1}[rel])
        rng = start, add_months(start, 1)
    else:
        rng = year_range(ref.year + {"last": -1, "this": 0, "next": 1}[rel])
    edge = (m.group("edge") or "").lower()
    if rel == "this" and edge == "earlier":
        return rng[0], min(rng[1], ref + timedelta(days=1))
    if rel == "this" and edge == "later":
        return max(rng[0], ref), rng[1]
    return rng


def _r_ago(m: re.Match[str], ctx: Context) -> DayRange | None:
    lo, hi = quantity(m.group("qty"))
    return ago(lo, hi, m.group("unit").lower(), ctx.ref)


def _r_in(m: re.Match[str], ctx: Context) -> DayRange | None:
    """ "in two days", "three weeks from now": the future mirror of `_r_ago`."""
    if m.group(0).lower().split()[-2:] == ["a", "day"]:
        return None  # "Rome wasn't built in a day"
    lo, hi = quantity(m.group("qty"))
    return ahead(lo, hi, m.group("unit").lower(), ctx.ref)


def _r_past_n(m: re.Match[str], ctx: Context) -> DayRange | None:
    """Rolling window ending with the reference day: "the past two weeks"."""
    _, hi = quantity(m.group("qty") or m.group("n") or "1")
    unit, ref = m.group("unit").lower(), ctx.ref
    end = ref + timedelta(days=1)
    if unit in ("day", "week", "weekend"):
        return ref - timedelta(days=hi * (1 if unit == "day" else 7)), end
    return shift_months(ref, -hi * (1 if unit == "month" else 12)), end


def _r_weekday(m: re.Match[str], ctx: Context) -> DayRange | None:
    raw_wd = m.group("wd")
    wd, ref = WEEKDAY_NUM[raw_wd.lower()], ctx.ref
    rel = " ".join((m.group("rel") or "").lower().split())
    abbreviated = raw_wd.lower() not in WEEKDAYS
    if abbreviated and (not rel or (rel == "on" and not raw_wd[0].isupper())):
        return None  # "Sat", "sun", "on sun loungers"
    if not rel and not raw_wd[0].isupper():
        return None  # "sunday school" in lower case is a noun phrase, not a date
    if not rel and re.search(r"\b(?:every|each)\s+$", ctx.text[max(0, m.start() - 8) : m.start()]):
        return None  # habitual, not a date
    back = (ref.weekday() - wd - 1) % 7 + 1
    ahead = (wd - ref.weekday() - 1) % 7 + 1
    if rel in ("last", "past", "previous", "this past"):
        return day_range(ref - timedelta(days=back))
    if rel in ("next", "coming"):
        return day_range(ref + timedelta(days=ahead))
    future = _is_future(m, ctx)
    if rel == "this":  # "this Tuesday": today or the coming one, unless told of as past
        shift = (wd - ref.weekday()) % 7 if future else -((ref.weekday() - wd) % 7)
        return day_range(ref + timedelta(days=shift))
    if future:
        return day_range(ref + timedelta(days=ahead))
    return day_range(ref - timedelta(days=back))


def _month_year(m: re.Match[str], ctx: Context, rel: str) -> int:
    """The year of a month named without one, per the module conventions."""
    month, ref = MONTH_NUM[m.group("mon").lower().rstrip(".")], ctx.ref
    if rel == "last":
        return ref.year if month < ref.month else ref.year - 1
    if rel == "next":
        return ref.year if month > ref.month else ref.year + 1
    if rel == "this":
        return ref.year
    if rel != "since" and _is_future(m, ctx):
        return ref.year if month >= ref.month else ref.year + 1
    return ref.year if month <= ref.month else ref.year - 1


def _r_month(m: re.Match[str], ctx: Context) -> DayRange | None:
    prep = " ".join((m.group("prep") or "").lower().split())
    mod = m.group("mod")
    if not prep and not mod:
        return None  # a bare month name: "May" is usually the verb
    month = MONTH_NUM[m.group("mon").lower().rstrip(".")]
    return apply_mod(mod, month_range(_month_year(m, ctx, prep), month))


def _r_month_span(m: re.Match[str], ctx: Context) -> DayRange | None:
    """ "June to August 2023": the first month takes the year of the second."""
    first, last = (MONTH_NUM[m.group(g).lower().rstrip(".")] for g in ("mon", "mon2"))
    year = int(m.group("y"))
    start = date(year - 1 if first > last else year, first, 1)
    return start, add_months(date(year, last, 1), 1)


def _r_the_weekend(m: re.Match[str], ctx: Context) -> DayRange | None:
    """ "over the weekend": the one just gone (the current one when said on it), or the coming
    one in a sentence about the future."""
    ref = ctx.ref
    if _is_future(m, ctx):
        saturday = ref + timedelta(days=(5 - ref.weekday()) % 7)
    elif ref.weekday() >= 5:
        saturday = ref - timedelta(days=ref.weekday() - 5)
    else:
        saturday = last_weekend(ref)
    return saturday, saturday + timedelta(days=2)


def _r_month_year(m: re.Match[str], ctx: Context) -> DayRange | None:
    month = MONTH_NUM[m.group("mon").lower().rstrip(".")]
    return apply_mod(m.group("mod"), month_range(int(m.group("y")), month))


def _r_day_month(m: re.Match[str], ctx: Context) -> DayRange | None:
    raw_month = m.group("mon")
    month, day = MONTH_NUM[raw_month.lower().rstrip(".")], int(m.group("d"))
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
    return day_range(date(year, month, day))


def _r_iso(m: re.Match[str], ctx: Context) -> DayRange | None:
    return _valid_day(int(m.group("y")), int(m.group("a")), int(m.group("b")))


def _r_numeric(m: re.Match[str], ctx: Context) -> DayRange | None:
    """8/5/2023 is US month/day unless the first number exceeds 12; 8.5.2023 is day.month."""
    a, b, year = int(m.group("a")), int(m.group("b")), int(m.group("y"))
    if m.group("sep") == "." or a > 12:
        return _valid_day(year, b, a)
    return _valid_day(year, a, b)


def _valid_day(year: int, month: int, day: int) -> DayRange | None:
    if not (1 <= month <= 12 and 1 <= day <= calendar.monthrange(year, month)[1]):
        return None
    return day_range(date(year, month, day))


def _r_year(m: re.Match[str], ctx: Context) -> DayRange | None:
    if not m.group("prep") and not m.group("mod"):
        return None
    return apply_mod(m.group("mod"), year_range(int(m.group("y"))))


def _r_year_span(m: re.Match[str], ctx: Context) -> DayRange | None:
    """ "from 2019 to 2021", "2019–2021", "between 2019 and 2021": both years whole ("2019
    and 2021" alone may be two years apart, so "and" takes "between")."""
    if m.group("and") and not m.group("between"):
        return None
    first, last = int(m.group("y")), int(m.group("y2"))
    if first >= last:
        return None
    return year_range(first)[0], year_range(last)[1]


def _r_part_of_year(m: re.Match[str], ctx: Context) -> DayRange | None:
    """ "Q3 2023", "the third quarter of 2023", "H1 2023", "the second half of 2023"."""
    ordinal = {"first": 1, "second": 2, "third": 3, "fourth": 4}
    year = int(m.group("y"))
    if m.group("q") or m.group("qw"):
        part, months = int(m.group("q") or ordinal[m.group("qw").lower()]), 3
    else:
        part, months = int(m.group("h") or ordinal[m.group("hw").lower()]), 6
    start = date(year, (part - 1) * months + 1, 1)
    return start, add_months(start, months)


def _r_decade(m: re.Match[str], ctx: Context) -> DayRange | None:
    """ "the 1990s": 1 Jan 1990 to 31 Dec 1999."""
    first = int(m.group("dec")) * 10
    return year_range(first)[0], year_range(first + 9)[1]


def _r_decade_rel(m: re.Match[str], ctx: Context) -> DayRange | None:
    """ "this decade": its ten calendar years; "the last decade", "the past two decades": the
    ten (twenty) years up to the reference day, as "the past year" is."""
    ref = ctx.ref
    if m.group("rel").lower() == "this":
        return year_range(ref.year - ref.year % 10)[0], year_range(ref.year - ref.year % 10 + 9)[1]
    _, hi = quantity(m.group("qty") or "1")
    return shift_months(ref, -120 * hi), ref + timedelta(days=1)


def _r_season_rel(m: re.Match[str], ctx: Context) -> DayRange | None:
    rel = " ".join(m.group("rel").lower().split())
    name, ref = m.group("s").lower(), ctx.ref
    years = [season_range(name, y) for y in range(ref.year - 2, ref.year + 2)]
    if rel in ("last", "past", "previous", "this past"):
        return max(r for r in years if r[1] <= ref)
    if rel in ("next", "coming"):
        return min(r for r in years if r[0] > ref)
    containing = [r for r in years if r[0] <= ref < r[1]]
    if containing:
        return containing[0]
    return season_range(name, ref.year)


def _r_season_year(m: re.Match[str], ctx: Context) -> DayRange | None:
    return apply_mod(m.group("mod"), season_range(m.group("s").lower(), int(m.group("y"))))


def _r_foreign(m: re.Match[str], ctx: Context) -> DayRange | None:
    languages = FOREIGN_MONTHS.get(m.group("w").lower())
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
    return day_range(parsed.date()) if day else month_range(parsed.year, parsed.month)


RULES: tuple[tuple[re.Pattern[str], Rule], ...] = (
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
            + MONTH_RE
            + r"(?:,?\s+"
            + YEAR_RE
            + ")?",
            ICASE,
        ),
        _r_day_month,
    ),
    (
        re.compile(
            r"\b"
            + MONTH_RE
            + r"\s+(?:the\s+)?(?P<d>\d{1,2})(?:st|nd|rd|th)?(?![\d:])\b(?:,?\s+"
            + YEAR_RE
            + ")?",
            ICASE,
        ),
        _r_day_month,
    ),
    (
        re.compile(
            r"\b(?:between\s+|from\s+)?"
            + MONTH_RE
            + r"\s*(?:-|–|to|till|until|through|and)\s*"
            + MONTH_RE.replace("<mon>", "<mon2>")
            + r",?\s+(?:of\s+)?"
            + YEAR_RE,
            ICASE,
        ),
        _r_month_span,
    ),
    (
        re.compile(r"\b(?:" + MOD_RE + r"\s*)?" + MONTH_RE + r",?\s+(?:of\s+)?" + YEAR_RE, ICASE),
        _r_month_year,
    ),
    (
        re.compile(r"\b(?:" + PREP_RE + r"\s+)?(?:" + MOD_RE + r"\s*)?" + MONTH_RE, ICASE),
        _r_month,
    ),
    (
        re.compile(
            r"\b(?:" + PREP_RE + r"\s+)?(?:" + MOD_RE + r"\s*)?(?:the\s+year\s+)?" + YEAR_RE,
            ICASE,
        ),
        _r_year,
    ),
    (
        re.compile(
            r"\b(?:(?P<between>between)\s+|from\s+)?(?P<y>(?:19|20)\d{2})\s*"
            r"(?:-|–|to|till|until|through|(?P<and>and))\s*" + YEAR_RE.replace("<y>", "<y2>"),
            ICASE,
        ),
        _r_year_span,
    ),
    (
        re.compile(
            r"\b(?:Q(?P<q>[1-4])|H(?P<h>[12])|(?:the\s+)?(?:"
            r"(?P<qw>first|second|third|fourth)\s+quarter|(?P<hw>first|second)\s+half)"
            r"\s+of)\s*,?\s+" + YEAR_RE,
            ICASE,
        ),
        _r_part_of_year,
    ),
    # "the 1900s" and "the 2000s" may be centuries: left out.
    (re.compile(r"\b(?P<dec>(?:19|20)[1-9])0['’]?s\b", ICASE), _r_decade),
    (
        re.compile(
            r"\b(?:the\s+)?(?P<rel>last|past|previous|this)\s+(?:" + QTY_RE + r"\s+)?decades?\b",
            ICASE,
        ),
        _r_decade_rel,
    ),
    (
        re.compile(r"\b" + REL_RE + r"\s+(?P<s>spring|summer|autumn|fall|winter)\b", ICASE),
        _r_season_rel,
    ),
    (
        re.compile(
            r"\b(?:"
            + MOD_RE
            + r"\s*)?(?:the\s+)?(?P<s>spring|summer|autumn|fall|winter),?\s+(?:of\s+)?"
            + YEAR_RE,
            ICASE,
        ),
        _r_season_year,
    ),
    (
        re.compile(
            r"\b(?:the\s+day\s+before\s+yesterday|the\s+day\s+after\s+tomorrow|yesterday|today|"
            r"tonight|tomorrow(?:\s+night)?|tmrw|tmr|last\s+night|the\s+other\s+day|"
            r"this\s+(?:morning|afternoon|evening))\b",
            ICASE,
        ),
        _r_dayword,
    ),
    (
        re.compile(
            r"\b(?:(?P<edge>earlier|later)\s+)?"
            + REL_RE
            + r"\s+(?P<unit>week|weekend|month|year)\b",
            ICASE,
        ),
        _r_rel_unit,
    ),
    (re.compile(r"\b(?:over|on|at|during|through)\s+the\s+weekend\b", ICASE), _r_the_weekend),
    (
        re.compile(
            r"\b(?:(?P<rel>this\s+past|last|next|this|on|past|previous|coming)\s+)?" + WEEKDAY_RE,
            ICASE,
        ),
        _r_weekday,
    ),
    (re.compile(r"\b" + QTY_RE + r"\s+" + UNIT_RE + r"\s+ago\b", ICASE), _r_ago),
    (
        re.compile(
            r"\bin\s+(?:about\s+|around\s+|another\s+)?" + QTY_RE + r"\s+" + UNIT_RE + r"\b",
            ICASE,
        ),
        _r_in,
    ),
    (re.compile(r"\b" + QTY_RE + r"\s+" + UNIT_RE + r"\s+from\s+(?:now|today)\b", ICASE), _r_in),
    (
        re.compile(
            r"\b(?:the\s+|these\s+)?(?:past\s+(?:"
            + QTY_RE
            + r"\s+)?|(?:last|previous)\s+(?P<n>(?!an?\b)(?:"
            + QTY_ALT
            + r"))\s+)"
            + UNIT_RE
            + r"\b",
            ICASE,
        ),
        _r_past_n,
    ),
    (
        re.compile(
            r"(?<![\w.])(?:(?P<d>\d{1,2})\.?\s+(?:de\s+)?)?(?P<w>[^\W\d_]{3,})\.?\s+"
            r"(?:de\s+|del\s+)?" + YEAR_RE
        ),
        _r_foreign,
    ),
)
# One cheap scan decides whether the rules above need to run at all (most sentences: no).
PREFILTER = re.compile(
    r"\d|\b(?:yesterday|today|tonight|tomorrow|tmrw?|ago|other\s+day|"
    r"(?:last|this|next|past|previous|coming|on)\s+(?:\w+\s+){0,2}?(?:week|month|year|decade|night|"
    r"morning|afternoon|evening|day|spring|summer|autumn|fall|winter|mon|tue|wed|thu|fri|sat|"
    r"sun|jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec|few|couple|several)\w*|"
    r"from\s+now|(?:over|at|during|through)\s+the\s+weekend|in\s+(?:about\s+|around\s+|another\s+)?(?:an?|few|couple|several|"
    + "|".join(NUMBER_WORDS[1:])
    + r"|thirty|forty|fifty)|"
    r"(?:mon|tues|wednes|thurs|fri|satur|sun)day|spring|summer|autumn|fall|winter|january|"
    r"february|march|april|june|july|august|september|october|november|december|"
    r"jan|feb|mar|apr|jun|jul|aug|sept?|oct|nov|dec)\b|(?-i:May\b)",
    ICASE,
)
