"""Chinese time expressions resolved against a fixed reference: the issue's table, case by case."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from engine.dates import find_time_spans, parse_query_window
from engine.dates.chinese import chinese_label, chinese_number
from engine.dates.questions import asks_time

# Friday 2 October 2026, afternoon UTC.
REF = datetime(2026, 10, 2, 15, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "expression", "first", "last"),
    [
        ("我昨天去了医院", "昨天", date(2026, 10, 1), date(2026, 10, 1)),
        ("前天下雨了", "前天", date(2026, 9, 30), date(2026, 9, 30)),
        ("今天上午开了会", "今天", date(2026, 10, 2), date(2026, 10, 2)),
        ("三天前交了稿", "三天前", date(2026, 9, 29), date(2026, 9, 29)),
        ("上周那篇稿子", "上周", date(2026, 9, 21), date(2026, 9, 27)),
        ("上周三见了小林", "上周三", date(2026, 9, 23), date(2026, 9, 23)),
        ("这周末去爬山", "这周末", date(2026, 10, 3), date(2026, 10, 4)),
        ("我下周去杭州", "下周", date(2026, 10, 5), date(2026, 10, 11)),
        ("上个月搬了家", "上个月", date(2026, 9, 1), date(2026, 9, 30)),
        ("本月初发了工资", "本月初", date(2026, 10, 1), date(2026, 10, 10)),
        ("去年换了工作", "去年", date(2025, 1, 1), date(2025, 12, 31)),
        ("去年春天去了日本", "去年春天", date(2025, 3, 1), date(2025, 5, 31)),
        ("今年五月结婚了", "今年五月", date(2026, 5, 1), date(2026, 5, 31)),
        ("2023年5月入职", "2023年5月", date(2023, 5, 1), date(2023, 5, 31)),
        ("5月8日是她生日", "5月8日", date(2026, 5, 8), date(2026, 5, 8)),
        ("二〇二三年毕业", "二〇二三年", date(2023, 1, 1), date(2023, 12, 31)),
        ("春节前要交稿", "春节前", date(2027, 1, 22), date(2027, 2, 4)),
        ("月底前发布", "月底", date(2026, 10, 21), date(2026, 10, 31)),
        ("上週見了老闆", "上週", date(2026, 9, 21), date(2026, 9, 27)),
        ("兩週前", "兩週前", date(2026, 9, 18), date(2026, 9, 24)),
        ("2023年5月8日入职", "2023年5月8日", date(2023, 5, 8), date(2023, 5, 8)),
        ("下个月要去上海", "下个月", date(2026, 11, 1), date(2026, 11, 30)),
        ("九月底那篇稿子", "九月底", date(2026, 9, 21), date(2026, 9, 30)),
        ("2023年5月初入职", "2023年5月初", date(2023, 5, 1), date(2023, 5, 10)),
        ("去年五月下旬搬家", "去年五月下旬", date(2025, 5, 21), date(2025, 5, 31)),
        ("上个月中旬见过", "上个月中旬", date(2026, 9, 11), date(2026, 9, 20)),
        ("报名了十月的马拉松", "十月", date(2026, 10, 1), date(2026, 10, 31)),
        ("报名了十一月的马拉松", "十一月", date(2026, 11, 1), date(2026, 11, 30)),
        ("十一期间待在家", "十一期间", date(2026, 10, 1), date(2026, 10, 7)),
        ("国庆节去了海边", "国庆节", date(2026, 10, 1), date(2026, 10, 7)),
        ("五一假期去了苏州", "五一假期", date(2026, 5, 1), date(2026, 5, 5)),
        ("劳动节加班", "劳动节", date(2026, 5, 1), date(2026, 5, 5)),
        ("元旦要回老家", "元旦", date(2027, 1, 1), date(2027, 1, 1)),
        ("圣诞节后回国", "圣诞节后", date(2026, 12, 26), date(2027, 1, 8)),
        ("除夕在外婆家", "除夕", date(2027, 2, 5), date(2027, 2, 5)),
        ("國慶去了海邊", "國慶", date(2026, 10, 1), date(2026, 10, 7)),
    ],
)
def test_chinese_expression_resolves_to_its_days(
    text: str, expression: str, first: date, last: date
) -> None:
    spans = find_time_spans(text, REF)
    assert len(spans) == 1, spans
    span = spans[0]
    assert span.expression == expression
    assert (span.start.date(), (span.end - timedelta(days=1)).date()) == (first, last)


@pytest.mark.parametrize(
    "text",
    ["周三开会", "春天来了", "最近很忙", "以前住在北京", "一二三", "十一个人", "第二十一期间"],
)
def test_ambiguous_chinese_expression_gives_no_date(text: str) -> None:
    assert find_time_spans(text, REF) == []


def test_query_window_of_last_spring() -> None:
    window = parse_query_window("去年春天小林去了哪里", datetime(2026, 12, 1, tzinfo=UTC))
    assert window is not None
    assert (window.start.date(), window.end.date()) == (date(2025, 3, 1), date(2025, 6, 1))


def test_query_without_time_words_has_no_window() -> None:
    assert parse_query_window("给小林写稿要注意什么", REF) is None


@pytest.mark.parametrize(
    ("first", "after", "text"),
    [
        (date(2026, 9, 21), date(2026, 9, 28), "2026年9月21日至27日"),
        (date(2025, 3, 1), date(2025, 6, 1), "2025年3月至5月"),
        (date(2026, 10, 1), date(2026, 10, 2), "2026年10月1日"),
        (date(2025, 1, 1), date(2026, 1, 1), "2025年"),
    ],
)
def test_chinese_label(first: date, after: date, text: str) -> None:
    assert chinese_label(first, after) == text


@pytest.mark.parametrize(
    ("raw", "value"),
    [("三", 3), ("十二", 12), ("二十", 20), ("二十五", 25), ("两", 2), ("二〇二三", 2023)],
)
def test_chinese_number(raw: str, value: int) -> None:
    assert chinese_number(raw) == value


@pytest.mark.parametrize(
    ("query", "asks"),
    [
        ("重写的稿子最晚什么时候交？", True),
        ("小林哪个月去了成都？", True),
        ("会议是星期几？", True),
        ("报告几号截止？", True),
        ("他是哪一年毕业的？", True),
        ("小林负责哪个栏目？", False),
        ("截图应该用什么尺寸？", False),
        ("小林十一期间待在哪里？", False),  # names a time, asks a place
        ("When did Caroline go to the LGBTQ support group?", False),  # Chinese cues only
    ],
)
def test_question_asking_for_a_time(query: str, asks: bool) -> None:
    assert asks_time(query) is asks
