"""Finding the time expressions of a text or a query and resolving them to `TimeSpan`s."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime

from engine.chinese import default_segmenter, has_han
from engine.dates.chinese import CHINESE_PREFILTER, CHINESE_RULES
from engine.dates.days import DayRange, label, midnight
from engine.dates.rules import PREFILTER, RULES, Context, Rule
from engine.dates.vocabulary import YEAR_RE
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

    Of overlapping candidates the longest wins ("in June 2023" is June 2023, not "in June").
    Chinese expressions are matched on the text with Traditional characters folded to
    Simplified ("上週" is "上周"), when the folding keeps every offset.
    """
    english = PREFILTER.search(text) is not None
    chinese = has_han(text) and CHINESE_PREFILTER.search(text) is not None
    if not english and not chinese:
        return []
    ref_dt = reference if reference.tzinfo is not None else reference.replace(tzinfo=UTC)
    ctx = Context(text=text, ref=ref_dt.date())
    found: list[tuple[int, int, DayRange]] = []
    for pattern, resolve in RULES if english else ():
        for m in pattern.finditer(text):
            rng = _resolved(resolve, m, ctx)
            if rng is not None and rng[0] < rng[1]:
                found.append((m.start(), m.end(), rng))
    if chinese:
        folded = default_segmenter().simplified(text)
        folded = folded if len(folded) == len(text) else text
        for pattern, resolve_zh in CHINESE_RULES:
            for m in pattern.finditer(folded):
                rng = resolve_zh(m, ctx.ref, folded)
                if rng is not None and rng[0] < rng[1]:
                    found.append((m.start(), m.end(), rng))
    found.sort(key=lambda f: (f[0] - f[1], f[0]))
    kept: list[tuple[int, int, DayRange]] = []
    for cand in found:
        if all(cand[1] <= k[0] or k[1] <= cand[0] for k in kept):
            kept.append(cand)
    spans: list[TimeSpan] = []
    for start, end, (first, after) in sorted(kept, key=lambda f: f[0]):
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


def _resolved(resolve: Rule, m: re.Match[str], ctx: Context) -> DayRange | None:
    """The rule's range, or None when it falls off Python's calendar (years 1-9999): "next
    year" said in 9999 names no date that can be held, so it is no date at all."""
    try:
        return resolve(m, ctx)
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
    char_start = min(s.char_start for s in spans)
    char_end = max(s.char_end for s in spans)
    return TimeSpan(
        start=min(s.start for s in spans),
        end=max(s.end for s in spans),
        expression=text[char_start:char_end],
        char_start=char_start,
        char_end=char_end,
    )


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


def parse_query_window(query: str, reference: datetime) -> TimeSpan | None:
    """The single best time window of a search query, or None when it names no time.

    Unlike text, a query's bare year counts ("Caroline pride parade 2022").
    """
    spans = find_time_spans(query, reference)
    if not spans:
        ref_dt = reference if reference.tzinfo is not None else reference.replace(tzinfo=UTC)
        spans = [
            span
            for m in _BARE_YEAR.finditer(query)
            if (span := _bare_year(m, ref_dt)) is not None and _storable(span)
        ]
    return merge_spans(spans, query)
