"""Finding the time expressions of a text or a query and resolving them to `TimeSpan`s."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from functools import partial

from engine.chinese import default_segmenter, has_han
from engine.dates.chinese import CHINESE_PREFILTER, CHINESE_RULES
from engine.dates.days import DayRange, ago, ahead, day_range, label, midnight, quantity
from engine.dates.rules import PREFILTER, RULES, Context
from engine.dates.vocabulary import QTY_ALT, UNIT_RE, WEEKDAY_NUM, WEEKDAY_RE, YEAR_RE
from engine.limits import EARLIEST_INSTANT, LATEST_INSTANT


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
        return label(self.start.date(), self.end.date())


def find_time_spans(text: str, reference: datetime) -> list[TimeSpan]:
    """Every time expression in `text`, resolved against `reference`, in text order.

    Of overlapping candidates the one naming the longest date wins, a leading preposition not
    counted ("during August 2021" is August 2021, not "during August" of the reference year).
    Chinese expressions are matched on the text with Traditional characters folded to
    Simplified ("上週" is "上周"), when the folding keeps every offset.
    """
    english = PREFILTER.search(text) is not None
    chinese = has_han(text) and CHINESE_PREFILTER.search(text) is not None
    if not english and not chinese:
        return []
    ref_dt = reference if reference.tzinfo is not None else reference.replace(tzinfo=UTC)
    ctx = Context(text=text, ref=ref_dt.date())
    # (start, end, where the date itself starts, range)
    found: list[tuple[int, int, int, DayRange]] = []
    for pattern, resolve in RULES if english else ():
        for m in pattern.finditer(text):
            rng = _resolved(partial(resolve, m, ctx))
            if rng is not None and rng[0] < rng[1]:
                found.append((m.start(), m.end(), _date_start(m), rng))
    if chinese:
        folded = default_segmenter().simplified(text)
        folded = folded if len(folded) == len(text) else text
        for pattern, resolve_zh in CHINESE_RULES:
            for m in pattern.finditer(folded):
                rng = _resolved(partial(resolve_zh, m, ctx.ref, folded))
                if rng is not None and rng[0] < rng[1]:
                    found.append((m.start(), m.end(), m.start(), rng))
    found.sort(key=lambda f: (f[2] - f[1], f[0] - f[1], f[0]))
    kept: list[tuple[int, int, int, DayRange]] = []
    for cand in found:
        if all(cand[1] <= k[0] or k[1] <= cand[0] for k in kept):
            kept.append(cand)
    spans: list[TimeSpan] = []
    for start, end, _, (first, after) in sorted(kept, key=lambda f: f[0]):
        span = TimeSpan(
            start=midnight(first, ref_dt),
            end=midnight(after, ref_dt),
            expression=text[start:end],
            char_start=start,
            char_end=end,
        )
        if _storable(span):
            spans.append(span)
    return spans


def _date_start(m: re.Match[str]) -> int:
    """Where the date of a rule's match starts: after its preposition, if it has one."""
    if "prep" not in m.re.groupindex or m.group("prep") is None:
        return m.start()
    start = m.end("prep")
    while start < m.end() and m.string[start].isspace():
        start += 1
    return start


def _resolved(resolve: Callable[[], DayRange | None]) -> DayRange | None:
    """A rule's range, or None when it falls off Python's calendar (years 1-9999): "next
    year" said in 9999, or "去年" in year 1, names no date that can be held, so it is no date
    at all."""
    try:
        return resolve()
    except (OverflowError, ValueError):
        return None


def _storable(span: TimeSpan) -> bool:
    """Both ends within the instants every later step can do arithmetic on
    (engine/limits.py), so no date found in text or a query can overflow downstream."""
    try:
        start, end = span.start.astimezone(UTC), span.end.astimezone(UTC)
    except OverflowError:
        return False
    return start >= EARLIEST_INSTANT and end <= LATEST_INSTANT


def merge_spans(spans: Sequence[TimeSpan], text: str) -> TimeSpan | None:
    """One window for several spans: the narrowest when it lies inside all the others
    (the most specific), else their union ("from June to August 2023")."""
    if not spans:
        return None
    narrowest = min(spans, key=lambda s: (s.end - s.start, s.char_start))
    if all(s.start <= narrowest.start and narrowest.end <= s.end for s in spans):
        return narrowest
    return _joined(min(s.start for s in spans), max(s.end for s in spans), spans, text)


def _joined(start: datetime, end: datetime, spans: Sequence[TimeSpan], text: str) -> TimeSpan:
    """[start, end) named by the text from the first span's expression to the last's."""
    char_start = min(s.char_start for s in spans)
    char_end = max(s.char_end for s in spans)
    return TimeSpan(start, end, text[char_start:char_end], char_start, char_end)


_BARE_YEAR = re.compile(r"(?<![\w.$£€])" + YEAR_RE)


def _bare_year(m: re.Match[str], ref_dt: datetime) -> TimeSpan | None:
    year = int(m.group("y"))
    if not 1 <= year < 9999:
        return None
    return TimeSpan(
        start=midnight(date(year, 1, 1), ref_dt),
        end=midnight(date(year + 1, 1, 1), ref_dt),
        expression=m.group(0),
        char_start=m.start(),
        char_end=m.end(),
    )


# A query's time named after one of these asks for one side of it: what came "before 2020",
# what happened "since 2020". Keys: the phrase, lower-cased with single spaces.
_OPEN_END = {
    "before": "start",  # the window ends where the time starts
    "prior to": "start",
    "earlier than": "start",
    "until": "end",  # ... where it ends ("until March": March included)
    "till": "end",
    "up to": "end",
    "by": "end",
}
_OPEN_START = {"since": "start", "after": "end", "later than": "end"}
_BOUND = r"(?P<w>before|prior\s+to|earlier\s+than|until|till|up\s+to|by|since|after|later\s+than)"
_BOUND_BEFORE = re.compile(r"\b" + _BOUND + r"\s+(?:the\s+)?$", re.IGNORECASE)
_BOUND_LEADING = re.compile(_BOUND + r"\b", re.IGNORECASE)
# "June 2023 onwards", "from June 2023 on": a bare "on" only where the clause ends.
_ONWARDS = re.compile(r"\s+(?:onwards?\b|on\s*(?:$|[,.;:?!)])|and\s+(?:later|after)\b)", re.I)
# "the week before", "two days after", "the Saturday after": a time counted from the one named.
_OFFSET = re.compile(
    r"(?:\b(?P<qty>" + QTY_ALT + r")|\bthe)\s+" + UNIT_RE + r"\s+$"
    r"|\b(?:the\s+)?" + WEEKDAY_RE + r"\s+$",
    re.IGNORECASE,
)


def _bounded(span: TimeSpan, query: str) -> tuple[TimeSpan, bool]:
    """The span as a bound word leading it reads it, and whether it is now open on one side:
    "before 2020" runs from the earliest instant engine/limits.py admits up to 1 Jan 2020;
    "the week before 3 August 2023" is 27 July-2 August, counted from the time named;
    "June 2023 onwards" and "from June 2023 on" are "since June 2023"."""
    leading = _BOUND_LEADING.match(span.expression)
    m = leading or _BOUND_BEFORE.search(query, 0, span.char_start)
    if m is None:
        if _ONWARDS.match(query, span.char_end):
            return replace(span, end=LATEST_INSTANT), True
        return span, False
    word = " ".join(m.group("w").lower().split())
    at = span.char_start + m.start() if leading else m.start()
    offset = _OFFSET.search(query, 0, at)
    # Counted back from where the time starts ("the week before"), or on from where it ends.
    earlier, later = _OPEN_END.get(word) == "start", _OPEN_START.get(word) == "end"
    if offset is not None and (earlier or later):
        try:
            counted = _counted(offset, later, span)
        except (OverflowError, ValueError):  # off the calendar, as in `_resolved`
            counted = None
        if counted is not None:
            first, after = counted
            read = TimeSpan(
                start=midnight(first, span.start),
                end=midnight(after, span.start),
                expression=query[offset.start() : span.char_end],
                char_start=offset.start(),
                char_end=span.char_end,
            )
            if _storable(read):
                return read, False
    if word in _OPEN_END:
        end = span.start if _OPEN_END[word] == "start" else span.end
        return replace(span, start=EARLIEST_INSTANT, end=end), True
    start = span.start if _OPEN_START[word] == "start" else span.end
    return replace(span, start=start, end=LATEST_INSTANT), True


def _counted(offset: re.Match[str], later: bool, span: TimeSpan) -> DayRange | None:
    """The days `offset` names before (or after, `later`) the span's days."""
    first, last = span.start.date(), (span.end - timedelta(days=1)).date()
    if offset.group("wd"):
        wd = WEEKDAY_NUM[offset.group("wd").lower()]
        if later:
            return day_range(last + timedelta(days=(wd - last.weekday() - 1) % 7 + 1))
        return day_range(first - timedelta(days=(first.weekday() - wd - 1) % 7 + 1))
    lo, hi = quantity(offset.group("qty")) if offset.group("qty") else (1, 1)
    unit = offset.group("unit").lower()
    if later and unit == "weekend":  # the first Saturday after the span, Sunday included
        saturday = last + timedelta(days=(5 - last.weekday() - 1) % 7 + 1)
        return saturday + timedelta(days=7 * (lo - 1)), saturday + timedelta(days=7 * hi - 5)
    return ahead(lo, hi, unit, last) if later else ago(lo, hi, unit, first)


def _intersection(spans: Sequence[TimeSpan], text: str) -> TimeSpan | None:
    """What every span holds ("after May 2023 and before 2024"), None if nothing."""
    start, end = max(s.start for s in spans), min(s.end for s in spans)
    return _joined(start, end, spans, text) if start < end else None


def parse_query_window(query: str, reference: datetime) -> TimeSpan | None:
    """The single best time window of a search query, or None when it names no time.

    Unlike text, a query's bare year counts ("Caroline pride parade 2022"), and a bound word
    opens the window on one side ("before 2020", "since May 2023", "after June 2023": from
    1 July 2023 on); several times of which one is so bounded are intersected, the others
    merged (merge_spans).
    """
    spans = find_time_spans(query, reference)
    if not spans:
        ref_dt = reference if reference.tzinfo is not None else reference.replace(tzinfo=UTC)
        spans = [
            span
            for m in _BARE_YEAR.finditer(query)
            if (span := _bare_year(m, ref_dt)) is not None and _storable(span)
        ]
    read = [(span, *_bounded(span, query)) for span in spans]
    # A time inside another's reading ("Saturday" of "the Saturday after 28 October") is read
    # with it, not again on its own.
    read = [
        (span, bounded, open_side)
        for i, (span, bounded, open_side) in enumerate(read)
        if not any(
            j != i and other.char_start <= span.char_start and span.char_end <= other.char_end
            for j, (_, other, _) in enumerate(read)
        )
    ]
    if any(open_side for _, _, open_side in read):
        # Bounds that leave nothing ("after 2030 and before 2020") fall back to the times.
        window = _intersection([bounded for _, bounded, _ in read], query)
        return window or merge_spans([span for span, _, _ in read], query)
    return merge_spans([bounded for _, bounded, _ in read], query)
