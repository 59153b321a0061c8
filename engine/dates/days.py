"""Day arithmetic: calendar periods as half-open `[first, after)` day ranges."""

from __future__ import annotations

import calendar
from datetime import date, datetime, timedelta

from engine.dates.vocabulary import NUMBER_WORDS, SEASON_MONTH

DayRange = tuple[date, date]


def add_months(d: date, k: int) -> date:
    """The first day of the month `k` months after `d`'s month."""
    y, m = divmod(d.year * 12 + d.month - 1 + k, 12)
    return date(y, m + 1, 1)


def shift_months(d: date, k: int) -> date:
    """`d` moved by `k` months, the day clamped to the target month's length."""
    first = add_months(d, k)
    return first.replace(day=min(d.day, calendar.monthrange(first.year, first.month)[1]))


def month_range(y: int, m: int) -> DayRange:
    start = date(y, m, 1)
    return start, add_months(start, 1)


def year_range(y: int) -> DayRange:
    return date(y, 1, 1), date(y + 1, 1, 1)


def day_range(d: date) -> DayRange:
    return d, d + timedelta(days=1)


def season_range(name: str, y: int) -> DayRange:
    start = date(y, SEASON_MONTH[name], 1)
    return start, add_months(start, 3)


def last_weekend(ref: date) -> date:
    """The Saturday of the most recent weekend that ended before `ref`."""
    saturday = ref - timedelta(days=(ref.weekday() - 5) % 7)
    return saturday if saturday + timedelta(days=2) <= ref else saturday - timedelta(days=7)


def ago(lo: int, hi: int, unit: str, ref: date) -> DayRange:
    """ "two weeks ago" said on `ref` (lo to hi units back, per the package's conventions)."""
    if unit == "day":
        return ref - timedelta(days=hi), ref - timedelta(days=lo - 1)
    if unit == "week":
        return ref - timedelta(days=7 * hi), ref - timedelta(days=7 * lo - 7)
    if unit == "weekend":
        sat = last_weekend(ref)
        return sat - timedelta(days=7 * (hi - 1)), sat - timedelta(days=7 * (lo - 1) - 2)
    if unit == "month":
        return add_months(ref, -hi), add_months(ref, -lo + 1)
    return date(ref.year - hi, 1, 1), date(ref.year - lo + 1, 1, 1)


def ahead(lo: int, hi: int, unit: str, ref: date) -> DayRange | None:
    """ "in two weeks" said on `ref`: the future mirror of `ago` (None for weekends)."""
    if unit == "day":
        return ref + timedelta(days=lo), ref + timedelta(days=hi + 1)
    if unit == "week":
        return ref + timedelta(days=7 * lo - 6), ref + timedelta(days=7 * hi + 1)
    if unit == "month":
        return add_months(ref, lo), add_months(ref, hi + 1)
    if unit == "year":
        return date(ref.year + lo, 1, 1), date(ref.year + hi + 1, 1, 1)
    return None


def apply_mod(mod: str | None, rng: DayRange) -> DayRange:
    """Narrow a range by a modifier: thirds by days, or an ordinal week / weekend."""
    if not mod:
        return rng
    start, end = rng
    mod = " ".join(mod.lower().replace("the ", "").replace("very ", "").split())
    months = (end.year - start.year) * 12 + end.month - start.month
    whole_months = start.day == end.day == 1 and months % 3 == 0
    cuts = (
        [add_months(start, months * k // 3) for k in (1, 2)]  # a year: Jan–Apr, May–Aug, ...
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


def quantity(raw: str) -> tuple[int, int]:
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
    n = tens[q] if q in tens else NUMBER_WORDS.index(q)
    return n, n


def midnight(d: date, ref: datetime) -> datetime:
    return datetime(d.year, d.month, d.day, tzinfo=ref.tzinfo)


def label(first: date, after: date) -> str:
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
