"""Time expressions resolved to half-open day ranges against a fixed reference."""

from __future__ import annotations

import random
from datetime import UTC, date, datetime, timedelta, timezone

import pytest

from engine.dates import TimeSpan, find_time_spans, merge_spans, parse_query_window
from engine.limits import EARLIEST_INSTANT, LATEST_INSTANT
from engine.recall.temporal import clamp_window
from engine.recall.types import TimeWindow

# Saturday 3 May 2025, mid-morning UTC.
REF = datetime(2025, 5, 3, 10, 0, tzinfo=UTC)


def only_span(text: str, reference: datetime = REF) -> TimeSpan:
    spans = find_time_spans(text, reference)
    assert len(spans) == 1, spans
    return spans[0]


def days(span: TimeSpan) -> tuple[date, date]:
    """The first and the last day of a span (its `end` is exclusive)."""
    return span.start.date(), (span.end - timedelta(days=1)).date()


@pytest.mark.parametrize(
    ("text", "expression", "first", "last"),
    [
        ("I went there yesterday.", "yesterday", date(2025, 5, 2), date(2025, 5, 2)),
        ("We had fun tonight", "tonight", date(2025, 5, 3), date(2025, 5, 3)),
        ("See you tomorrow", "tomorrow", date(2025, 5, 4), date(2025, 5, 4)),
        ("We camped last week", "last week", date(2025, 4, 26), date(2025, 5, 2)),
        ("busy this week", "this week", date(2025, 4, 28), date(2025, 5, 4)),
        ("I'm off next week", "next week", date(2025, 5, 4), date(2025, 5, 10)),
        ("They arrive in two days", "in two days", date(2025, 5, 5), date(2025, 5, 5)),
        ("I loved it last spring", "last spring", date(2024, 3, 1), date(2024, 5, 31)),
        ("It happened two weeks ago", "two weeks ago", date(2025, 4, 19), date(2025, 4, 25)),
        ("a few days ago", "a few days ago", date(2025, 4, 29), date(2025, 5, 1)),
        ("the last two weeks", "the last two weeks", date(2025, 4, 19), date(2025, 5, 3)),
        ("in the past 3 days", "the past 3 days", date(2025, 4, 30), date(2025, 5, 3)),
        ("ten years ago", "ten years ago", date(2015, 1, 1), date(2015, 12, 31)),
        ("We met in June 2023", "June 2023", date(2023, 6, 1), date(2023, 6, 30)),
        ("It was on 8 May 2023.", "8 May 2023", date(2023, 5, 8), date(2023, 5, 8)),
        ("due May 8, 2023", "May 8, 2023", date(2023, 5, 8), date(2023, 5, 8)),
        ("logged 2023-05-08", "2023-05-08", date(2023, 5, 8), date(2023, 5, 8)),
        ("I ran last Friday", "last Friday", date(2025, 5, 2), date(2025, 5, 2)),
        ("last tues was rough", "last tues", date(2025, 4, 29), date(2025, 4, 29)),
        ("we moved in 2022", "in 2022", date(2022, 1, 1), date(2022, 12, 31)),
        ("last month", "last month", date(2025, 4, 1), date(2025, 4, 30)),
        ("next month", "next month", date(2025, 6, 1), date(2025, 6, 30)),
        ("last year", "last year", date(2024, 1, 1), date(2024, 12, 31)),
        ("last weekend", "last weekend", date(2025, 4, 26), date(2025, 4, 27)),
        ("this summer", "this summer", date(2025, 6, 1), date(2025, 8, 31)),
        ("in the fall of 2022", "the fall of 2022", date(2022, 9, 1), date(2022, 11, 30)),
        ("winter 2022", "winter 2022", date(2022, 12, 1), date(2023, 2, 28)),
        ("first week of May 2023", "first week of May 2023", date(2023, 5, 1), date(2023, 5, 7)),
        ("early 2022", "early 2022", date(2022, 1, 1), date(2022, 4, 30)),
        # A preposition before "Month Year" does not make the month the reference year's.
        ("lived here since May 2020", "May 2020", date(2020, 5, 1), date(2020, 5, 31)),
        ("during August 2021", "August 2021", date(2021, 8, 1), date(2021, 8, 31)),
        ("around March 2022", "March 2022", date(2022, 3, 1), date(2022, 3, 31)),
        (
            "from 2019 to 2021 she studied",
            "from 2019 to 2021",
            date(2019, 1, 1),
            date(2021, 12, 31),
        ),
        ("between 2019 and 2021", "between 2019 and 2021", date(2019, 1, 1), date(2021, 12, 31)),
        ("the 2019–2021 season", "2019–2021", date(2019, 1, 1), date(2021, 12, 31)),
        ("music of the 1990s", "1990s", date(1990, 1, 1), date(1999, 12, 31)),
        ("sales in Q3 2023 rose", "Q3 2023", date(2023, 7, 1), date(2023, 9, 30)),
        (
            "the fourth quarter of 2021",
            "the fourth quarter of 2021",
            date(2021, 10, 1),
            date(2021, 12, 31),
        ),
        ("H2 2022 plans", "H2 2022", date(2022, 7, 1), date(2022, 12, 31)),
        ("sales in q3 2023", "q3 2023", date(2023, 7, 1), date(2023, 9, 30)),
        # A decade counted back from the reference day, as "the past year" is.
        ("over the last decade", "the last decade", date(2015, 5, 3), date(2025, 5, 3)),
        ("the past two decades", "the past two decades", date(2005, 5, 3), date(2025, 5, 3)),
        ("this decade", "this decade", date(2020, 1, 1), date(2029, 12, 31)),
        (
            "in the first half of 2023",
            "the first half of 2023",
            date(2023, 1, 1),
            date(2023, 6, 30),
        ),
        (
            "from June to August 2023",
            "from June to August 2023",
            date(2023, 6, 1),
            date(2023, 8, 31),
        ),
        ("8 mai 2023", "8 mai 2023", date(2023, 5, 8), date(2023, 5, 8)),
    ],
)
def test_expression_resolves_to_range(text: str, expression: str, first: date, last: date) -> None:
    span = only_span(text)
    assert (span.expression, days(span)) == (expression, (first, last))


@pytest.mark.parametrize(
    "text",
    [
        "I may go",
        "We do that",
        "They march every year",
        "I sat on the sun lounger",
        "Sat",
        "Mon",
        "the second one",
        "right now",
        "room 101 has 3 beds",
        "I paid 2000 dollars",
        "May I ask?",
        "sunday school",
        "every Friday",
        "Rome wasn't built in a day",
        "the score was 8/5",
    ],
)
def test_word_that_is_not_a_date_makes_no_span(text: str) -> None:
    assert find_time_spans(text, REF) == []


def test_end_is_exclusive_midnight_in_reference_timezone() -> None:
    span = only_span("yesterday")
    assert (span.start, span.end) == (
        datetime(2025, 5, 2, tzinfo=UTC),
        datetime(2025, 5, 3, tzinfo=UTC),
    )


def test_naive_reference_is_treated_as_utc() -> None:
    assert only_span("yesterday", REF.replace(tzinfo=None)).start.tzinfo == UTC


def test_reference_timezone_decides_the_day() -> None:
    tokyo = timezone(timedelta(hours=9))
    late = datetime(2025, 5, 3, 20, 0, tzinfo=UTC).astimezone(tokyo)  # 4 May in Tokyo
    assert days(only_span("yesterday", late)) == (date(2025, 5, 3), date(2025, 5, 3))


def test_char_offsets_point_at_the_expression() -> None:
    text = "Caroline went to a support group yesterday and loved it."
    span = only_span(text)
    assert text[span.char_start : span.char_end] == "yesterday"


def test_last_spring_written_after_spring_ended_is_this_years() -> None:
    assert days(only_span("last spring", datetime(2025, 6, 1, tzinfo=UTC))) == (
        date(2025, 3, 1),
        date(2025, 5, 31),
    )


def test_last_weekday_on_that_weekday_is_a_week_back() -> None:
    friday = datetime(2025, 5, 2, 12, tzinfo=UTC)
    assert days(only_span("last Friday", friday))[0] == date(2025, 4, 25)


def test_on_weekday_is_past_by_default() -> None:
    assert days(only_span("I saw him on Monday"))[0] == date(2025, 4, 28)


def test_on_weekday_is_future_when_the_sentence_is() -> None:
    assert days(only_span("I'll see him on Monday"))[0] == date(2025, 5, 5)


def test_month_without_year_is_the_most_recent_one() -> None:
    assert days(only_span("in June")) == (date(2024, 6, 1), date(2024, 6, 30))


def test_month_without_year_includes_the_current_month() -> None:
    assert days(only_span("in May")) == (date(2025, 5, 1), date(2025, 5, 31))


def test_slash_date_is_month_first_unless_impossible() -> None:
    assert days(only_span("8/5/2023"))[0] == date(2023, 8, 5)
    assert days(only_span("13/5/2023"))[0] == date(2023, 5, 13)


def test_longest_expression_wins_over_overlapping_ones() -> None:
    assert only_span("the last week of August 2023").expression == "the last week of August 2023"


@pytest.mark.parametrize(
    ("text", "first", "last"),
    [
        # said on Wednesday 4 October 2023 (LoCoMo conv-44: "the weekend before 4th October")
        ("I took my pups to the beach over the weekend", date(2023, 9, 30), date(2023, 10, 1)),
        ("We went camping on the weekend.", date(2023, 9, 30), date(2023, 10, 1)),
        ("We will go hiking over the weekend", date(2023, 10, 7), date(2023, 10, 8)),
        ("I'm going camping over the weekend", date(2023, 10, 7), date(2023, 10, 8)),
        ("We were going camping over the weekend", date(2023, 9, 30), date(2023, 10, 1)),
    ],
)
def test_the_weekend_is_the_one_just_gone_unless_the_sentence_looks_ahead(
    text: str, first: date, last: date
) -> None:
    assert days(only_span(text, datetime(2023, 10, 4, 16, 18, tzinfo=UTC))) == (first, last)


def test_the_weekend_said_on_it_is_that_weekend() -> None:
    assert days(only_span("fun over the weekend", REF)) == (date(2025, 5, 3), date(2025, 5, 4))


def test_a_decade_that_may_be_a_century_is_no_date() -> None:
    assert find_time_spans("a book from the 1900s", REF) == []


def test_a_time_followed_by_on_and_more_words_is_not_open() -> None:
    window = parse_query_window("a picnic in June 2023 on the beach", REF)
    assert window is not None
    assert days(window) == (date(2023, 6, 1), date(2023, 6, 30))


def test_two_years_joined_by_and_are_no_range() -> None:
    assert only_span("in 2019 and 2021").expression == "in 2019"


@pytest.mark.parametrize(
    ("query", "start", "end"),
    [
        ("what did she do before 2020", EARLIEST_INSTANT, datetime(2020, 1, 1, tzinfo=UTC)),
        ("prior to June 2023", EARLIEST_INSTANT, datetime(2023, 6, 1, tzinfo=UTC)),
        ("until March 2024", EARLIEST_INSTANT, datetime(2024, 4, 1, tzinfo=UTC)),
        ("what had she finished by June 2023", EARLIEST_INSTANT, datetime(2023, 7, 1, tzinfo=UTC)),
        ("since 2022", datetime(2022, 1, 1, tzinfo=UTC), LATEST_INSTANT),
        ("after June 2023", datetime(2023, 7, 1, tzinfo=UTC), LATEST_INSTANT),
        ("what has she done June 2023 onwards", datetime(2023, 6, 1, tzinfo=UTC), LATEST_INSTANT),
        ("from June 2023 on, where did he go", datetime(2023, 6, 1, tzinfo=UTC), LATEST_INSTANT),
        ("2022 and later", datetime(2022, 1, 1, tzinfo=UTC), LATEST_INSTANT),
        ("parade after 2022", datetime(2023, 1, 1, tzinfo=UTC), LATEST_INSTANT),
        (
            "after May 2023 and before 2024",
            datetime(2023, 6, 1, tzinfo=UTC),
            datetime(2024, 1, 1, tzinfo=UTC),
        ),
    ],
)
def test_a_bound_word_opens_the_query_window_on_one_side(
    query: str, start: datetime, end: datetime
) -> None:
    window = parse_query_window(query, REF)
    assert window is not None
    assert (window.start, window.end) == (start, end)


@pytest.mark.parametrize(
    ("query", "first", "last"),
    [
        ("What did John do the week before August 3, 2023?", date(2023, 7, 27), date(2023, 8, 2)),
        ("the puppy she got two weeks before August 11, 2023", date(2023, 7, 28), date(2023, 8, 3)),
        ("the weekend before 4th October, 2023", date(2023, 9, 30), date(2023, 10, 1)),
        ("on the Saturday after October 28, 2023", date(2023, 11, 4), date(2023, 11, 4)),
        ("the Friday before 3 November 2023", date(2023, 10, 27), date(2023, 10, 27)),
        ("the day after 5 May 2023", date(2023, 5, 6), date(2023, 5, 6)),
        ("the weekend after 4 October 2023", date(2023, 10, 7), date(2023, 10, 8)),
    ],
)
def test_a_time_counted_from_the_one_named_is_read_from_it(
    query: str, first: date, last: date
) -> None:
    # LoCoMo asks these: the named day alone, or the weekday nearest the reference, is wrong.
    window = parse_query_window(query, REF)
    assert window is not None
    assert days(window) == (first, last)


def test_bounds_that_exclude_each_other_fall_back_to_the_times_named() -> None:
    window = parse_query_window("after 2030 and before 2020", REF)
    assert window is not None
    assert days(window) == (date(2020, 1, 1), date(2030, 12, 31))


def test_several_expressions_are_returned_in_text_order() -> None:
    spans = find_time_spans("Yesterday was busy, and tomorrow too.", REF)
    assert [s.expression for s in spans] == ["Yesterday", "tomorrow"]


@pytest.mark.parametrize(
    ("text", "label"),
    [
        ("yesterday", "2 May 2025"),
        ("last week", "26 April–2 May 2025"),
        ("last month", "April 2025"),
        ("last spring", "March–May 2024"),
        ("last year", "2024"),
        ("next winter", "December 2025–February 2026"),
    ],
)
def test_label_reads_the_range(text: str, label: str) -> None:
    assert only_span(text).label() == label


def test_query_window_finds_year_phrase() -> None:
    window = parse_query_window("when did X happen in 2023", REF)
    assert window is not None
    assert days(window) == (date(2023, 1, 1), date(2023, 12, 31))


def test_query_window_resolves_season() -> None:
    window = parse_query_window("what did she do last spring", REF)
    assert window is not None
    assert days(window) == (date(2024, 3, 1), date(2024, 5, 31))


def test_query_window_resolves_weeks_ago() -> None:
    window = parse_query_window("two weeks ago", REF)
    assert window is not None
    assert window.expression == "two weeks ago"


def test_query_window_accepts_a_bare_year() -> None:
    window = parse_query_window("Caroline pride parade 2022", REF)
    assert window is not None
    assert days(window) == (date(2022, 1, 1), date(2022, 12, 31))


def test_query_without_time_has_no_window() -> None:
    assert parse_query_window("When did Caroline go to the LGBTQ support group?", REF) is None


def test_merge_prefers_the_most_specific_nested_span() -> None:
    text = "in May 2023, on 8 May 2023"
    merged = merge_spans(find_time_spans(text, REF), text)
    assert merged is not None
    assert days(merged) == (date(2023, 5, 8), date(2023, 5, 8))


def test_merge_unions_disjoint_spans() -> None:
    text = "from 2019 until 2021"
    merged = merge_spans(find_time_spans(text, REF), text)
    assert merged is not None
    assert (days(merged), merged.expression) == ((date(2019, 1, 1), date(2021, 12, 31)), text)


@pytest.mark.parametrize(
    ("text", "reference"),
    [
        ("what did I do last year", datetime(1, 6, 1, tzinfo=UTC)),
        ("what will I do next year", datetime(9999, 6, 1, tzinfo=UTC)),
        ("the week after next", datetime(9999, 12, 25, tzinfo=UTC)),
        ("three days ago", datetime(1, 1, 2, tzinfo=timezone(timedelta(hours=14)))),
        ("in 9999", datetime(9999, 6, 1, tzinfo=UTC)),
        ("去年", datetime(1, 1, 3, tzinfo=UTC)),  # the Chinese rules raised here
        ("上周", datetime(1, 1, 3, tzinfo=UTC)),
        ("明年", datetime(9999, 12, 29, tzinfo=UTC)),
    ],
)
def test_ranges_off_the_calendar_are_no_dates(text: str, reference: datetime) -> None:
    """Years 1 and 9999 at the reference: the range would leave Python's calendar (or the
    instants engine/limits.py admits), so the expression names no date instead of raising."""
    assert find_time_spans(text, reference) == []
    window = parse_query_window(text, reference)
    assert window is None


_PIECES = (
    "before", "after", "since", "until", "up to", "prior to", "later than", "the", "week",
    "weekend", "two", "999", "a few", "Saturday", "day", "month", "years", "and", "between",
    "from", "to", "–", "2019", "2099", "1900", "1990s", "December 31, 2099", "1 January 1900",
    "31.12.2099", "last spring", "yesterday", "in May", "May 2020", "over the weekend",
    "9999年12月31日", "上周", "去年", "明年", "?", "this decade", "the past two decades",
    "onwards", "on", "and later", "q4 9999", "H1 1",
)  # fmt: skip
_EDGES = (
    datetime(2025, 1, 15, tzinfo=UTC),
    datetime(1, 1, 3, tzinfo=UTC),
    datetime(9999, 12, 29, tzinfo=UTC),
    datetime(2099, 12, 31, 23, tzinfo=timezone(timedelta(hours=14))),
)


def test_no_query_words_at_any_admitted_reference_raise() -> None:
    """Random strings of time words, at references on the calendar's edges: a window, when
    there is one, is non-empty and inside the admitted instants, and nothing raises."""
    rng = random.Random(7)
    for _ in range(1500):
        query = " ".join(rng.choice(_PIECES) for _ in range(rng.randint(1, 7)))
        for reference in _EDGES:
            window = parse_query_window(query, reference)
            if window is not None:
                assert window.start < window.end, (query, reference)
                assert window.start >= EARLIEST_INSTANT and window.end <= LATEST_INSTANT


def test_a_temporal_window_is_clamped_to_the_admitted_instants() -> None:
    window = TimeWindow(datetime.min.replace(tzinfo=UTC), datetime.max.replace(tzinfo=UTC))
    clamped = clamp_window(window)
    assert (clamped.start, clamped.end) == (EARLIEST_INSTANT, LATEST_INSTANT)
