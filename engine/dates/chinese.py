"""Chinese time expressions: one table of patterns, each resolved to a day range relative to
the reference day, with the conventions Chinese speakers mean.

- 上周 / 这周 / 下周 (and 星期, 礼拜) are calendar weeks, Monday first: "上周" written on Fri
  2 Oct 2026 is Mon 21 – Sun 27 Sep 2026. 上周三 is the Wednesday of that week; 这周末 the
  Saturday–Sunday of the current week.
- 昨天 / 前天 / 大前天, 今天 (with 上午, 下午, 晚上 ...), 明天 / 后天 are single days; "三天前"
  is one day, "两周前" the 7-day block as in English ("N weeks ago"), "三个月前" a calendar
  month, "几天前" 2–4 days back.
- 上个月 / 本月 / 下个月 are calendar months; 月初 / 月中 / 月底 (月末) split a month into
  thirds (1–10, 11–20, 21–end); 年初 / 年底 a year into thirds by months.
- 去年 / 前年 / 今年 / 明年 and seasons (春天 Mar–May, 夏天 Jun–Aug, 秋天 Sep–Nov, 冬天
  Dec–Feb, named by the year they start): "去年春天" written in 2026 is March–May 2025.
- 2023年5月8日, 2023年5月, 2023年, 二〇二三年; 五月 / 5月8日 without a year are the most
  recent one on or before the reference (the next one in a sentence about the future).
- 九月底 / 2023年5月初 / 去年五月下旬: a named month split into thirds like 月底 (上旬, 中旬,
  下旬 are the thirds by name).
- 春节 is the week from New Year's Eve (lunar calendar, from a table for 2015–2035), 除夕 its
  eve; the public holidays of fixed date are 元旦 (1 Jan), 五一 / 劳动节 (1–5 May), 国庆 / 十一
  (1–7 Oct; "十一" only with 假期, 长假, 期间 or 黄金周, else it is the number 11), and 情人节
  (14 Feb) and 圣诞 (25 Dec). X前 is the two weeks before, X后 the two weeks after; the
  occurrence nearest the reference is meant (the next one in a sentence about the future).
- 报名, 预订, 预约 ... of an event mark the sentence as future, like 要 or 打算: "报名了十月的
  马拉松" written in September is this October's.
- A bare weekday (周三), a bare season (春天), 最近 and 以前 give no date: they are ambiguous,
  and no date is better than a wrong one.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable
from datetime import date, timedelta
from typing import Final

from engine.dates.days import DayRange, add_months, day_range, month_range, year_range

# Gregorian date of the first day of the lunar year (春节, 正月初一).
_SPRING_FESTIVAL: Final = {
    2015: date(2015, 2, 19),
    2016: date(2016, 2, 8),
    2017: date(2017, 1, 28),
    2018: date(2018, 2, 16),
    2019: date(2019, 2, 5),
    2020: date(2020, 1, 25),
    2021: date(2021, 2, 12),
    2022: date(2022, 2, 1),
    2023: date(2023, 1, 22),
    2024: date(2024, 2, 10),
    2025: date(2025, 1, 29),
    2026: date(2026, 2, 17),
    2027: date(2027, 2, 6),
    2028: date(2028, 1, 26),
    2029: date(2029, 2, 13),
    2030: date(2030, 2, 3),
    2031: date(2031, 1, 23),
    2032: date(2032, 2, 11),
    2033: date(2033, 1, 31),
    2034: date(2034, 2, 19),
    2035: date(2035, 2, 8),
}
_DIGITS: Final = dict(
    zip("〇零一二两三四五六七八九", (0, 0, 1, 2, 2, 3, 4, 5, 6, 7, 8, 9), strict=True)
)
_NUM: Final = r"[0-9〇零一二两三四五六七八九十]{1,3}"
_DAY_OFFSET: Final = {
    **{"大前天": -3, "前天": -2, "昨天": -1, "昨日": -1, "昨晚": -1},
    **{"今天": 0, "今日": 0, "今早": 0, "今晚": 0},
    **{"明天": 1, "明日": 1, "后天": 2, "大后天": 3},
}
_WEEKDAY: Final = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}
_SEASON: Final = {"春": 3, "夏": 6, "秋": 9, "冬": 12}
_WEEK: Final = r"(?:周|星期|礼拜|个星期|个礼拜)"
_FUTURE: Final = re.compile(
    r"要|会|将|打算|准备|计划|下周|下个|明天|明年|以后|之后|到时|报名|预订|预定|预约|即将|快要"
)
_SENTENCE_END: Final = re.compile(r"[。！？!?；;\n]")


def chinese_number(raw: str) -> int | None:
    """ "三" 3, "十二" 12, "二十" 20, "二十五" 25, "5" 5, "二〇二三" 2023 (digit by digit)."""
    if raw.isdigit() and raw.isascii():
        return int(raw)
    if "十" not in raw:
        if not all(c in _DIGITS for c in raw):
            return None
        return int("".join(str(_DIGITS[c]) for c in raw))
    tens, _, units = raw.partition("十")
    if (tens and tens not in _DIGITS) or (units and units not in _DIGITS) or len(raw) > 3:
        return None
    return (_DIGITS[tens] if tens else 1) * 10 + (_DIGITS[units] if units else 0)


def _monday(ref: date, weeks: int) -> date:
    return ref - timedelta(days=ref.weekday()) + timedelta(days=7 * weeks)


def _is_future(m: re.Match[str], text: str) -> bool:
    before = [x.end() for x in _SENTENCE_END.finditer(text, 0, m.start())]
    after = _SENTENCE_END.search(text, m.end())
    sentence = text[before[-1] if before else 0 : after.start() if after else len(text)]
    return _FUTURE.search(sentence.replace(m.group(0), "")) is not None


# 月初/月中/月底 and 上旬/中旬/下旬 name the same thirds of a month.
_PART: Final = r"(?P<part>上旬|中旬|下旬|初|中|底|末)"
_THIRD: Final = {"初": 0, "头": 0, "上旬": 0, "中": 1, "中旬": 1, "底": 2, "末": 2, "下旬": 2}


def _thirds(rng: DayRange, part: str) -> DayRange:
    start, end = rng
    months = (end.year - start.year) * 12 + end.month - start.month
    if start.day == end.day == 1 and months == 12:  # a year: by months
        cuts = [add_months(start, 4), add_months(start, 8)]
    else:
        cuts = [start + timedelta(days=10), start + timedelta(days=20)]
    bounds = [start, *cuts, end]
    third = _THIRD[part]
    return bounds[third], bounds[third + 1]


_Resolver = Callable[[re.Match[str], date, str], DayRange | None]


def _r_day(m: re.Match[str], ref: date, text: str) -> DayRange | None:
    return day_range(ref + timedelta(days=_DAY_OFFSET[m.group("w")]))


def _r_ago(m: re.Match[str], ref: date, text: str) -> DayRange | None:
    raw, unit = m.group("n"), m.group("u")
    if raw == "几":
        lo, hi = 2, 4
    else:
        n = chinese_number(raw)
        if n is None or n < 1:
            return None
        lo = hi = n
    if unit == "天":
        return ref - timedelta(days=hi), ref - timedelta(days=lo - 1)
    if unit in ("周", "星期", "个星期", "礼拜", "个礼拜"):
        return ref - timedelta(days=7 * hi), ref - timedelta(days=7 * lo - 7)
    if unit in ("个月", "月"):
        return add_months(ref, -hi), add_months(ref, -lo + 1)
    return date(ref.year - hi, 1, 1), date(ref.year - lo + 1, 1, 1)


def _r_week(m: re.Match[str], ref: date, text: str) -> DayRange | None:
    weeks = {"上": -1, "这": 0, "本": 0, "下": 1}[m.group("rel")]
    monday = _monday(ref, weeks)
    day = m.group("d")
    if day == "末":
        return monday + timedelta(days=5), monday + timedelta(days=7)
    if day:
        return day_range(monday + timedelta(days=_WEEKDAY[day]))
    return monday, monday + timedelta(days=7)


def _r_month_rel(m: re.Match[str], ref: date, text: str) -> DayRange | None:
    shift = {"上": -1, "这": 0, "本": 0, "下": 1}.get(m.group("rel") or "本", 0)
    start = add_months(ref, shift)
    rng = start, add_months(start, 1)
    part = m.groupdict().get("part")
    return _thirds(rng, part) if part else rng


def _year_of(word: str, ref: date) -> int:
    return ref.year + {"前年": -2, "去年": -1, "今年": 0, "明年": 1, "后年": 2}[word]


def _r_year_rel(m: re.Match[str], ref: date, text: str) -> DayRange | None:
    year = _year_of(m.group("y"), ref)
    if m.group("s"):
        start = date(year, _SEASON[m.group("s")], 1)
        return start, add_months(start, 3)
    if m.group("mon"):
        month = chinese_number(m.group("mon"))
        if month is None or not 1 <= month <= 12:
            return None
        if m.group("d"):
            return _valid_day(year, month, m.group("d"))
        return _month_part(year, month, m.group("mpart"))
    rng = year_range(year)
    return _thirds(rng, m.group("part")) if m.group("part") else rng


def _month_part(year: int, month: int, part: str | None) -> DayRange:
    rng = month_range(year, month)
    return _thirds(rng, part) if part else rng


def _valid_day(year: int, month: int, raw_day: str) -> DayRange | None:
    day = chinese_number(raw_day)
    if day is None or not 1 <= day <= calendar.monthrange(year, month)[1]:
        return None
    return day_range(date(year, month, day))


def _r_absolute(m: re.Match[str], ref: date, text: str) -> DayRange | None:
    year = chinese_number(m.group("y"))
    if year is None or not 1900 <= year <= 2100:
        return None
    if not m.group("mon"):
        return year_range(year)
    month = chinese_number(m.group("mon"))
    if month is None or not 1 <= month <= 12:
        return None
    if m.group("d"):
        return _valid_day(year, month, m.group("d"))
    return _month_part(year, month, m.group("part"))


def _r_month_day(m: re.Match[str], ref: date, text: str) -> DayRange | None:
    """ "5月8日", "五月": the most recent on or before the reference, or the next one."""
    month = chinese_number(m.group("mon"))
    if month is None or not 1 <= month <= 12:
        return None
    day = chinese_number(m.group("d")) if m.group("d") else 1
    if day is None:
        return None
    future = _is_future(m, text)
    year = ref.year
    if future and (month, day) < (ref.month, ref.day if m.group("d") else 1):
        year += 1
    elif not future and (month, day) > (ref.month, ref.day):
        year -= 1
    if m.group("d"):
        return _valid_day(year, month, m.group("d"))
    return _month_part(year, month, m.group("part"))


def _spring_festival(year: int) -> DayRange | None:
    first = _SPRING_FESTIVAL.get(year)
    return None if first is None else (first - timedelta(days=1), first + timedelta(days=6))


def _new_years_eve(year: int) -> DayRange | None:
    first = _SPRING_FESTIVAL.get(year)
    return None if first is None else day_range(first - timedelta(days=1))


def _fixed(month: int, day: int, days: int) -> Callable[[int], DayRange | None]:
    return lambda year: (date(year, month, day), date(year, month, day) + timedelta(days=days))


# Holiday name (its first two characters) -> its days in a given year.
_HOLIDAYS: Final[dict[str, Callable[[int], DayRange | None]]] = {
    "春节": _spring_festival,
    "过年": _spring_festival,
    "除夕": _new_years_eve,
    "元旦": _fixed(1, 1, 1),
    "五一": _fixed(5, 1, 5),
    "劳动": _fixed(5, 1, 5),
    "国庆": _fixed(10, 1, 7),
    "十一": _fixed(10, 1, 7),
    "情人": _fixed(2, 14, 1),
    "圣诞": _fixed(12, 25, 1),
}


def _distance(rng: DayRange, ref: date) -> int:
    if rng[0] <= ref < rng[1]:
        return 0
    return min(abs((rng[0] - ref).days), abs((rng[1] - timedelta(days=1) - ref).days))


def _r_festival(m: re.Match[str], ref: date, text: str) -> DayRange | None:
    days_of = _HOLIDAYS[m.group("h")[:2]]
    years = [days_of(y) for y in (ref.year - 1, ref.year, ref.year + 1)]
    known = [h for h in years if h is not None]
    if len(known) < len(years):
        return None  # outside the table: no date rather than a guess
    holiday = min(known, key=lambda h: _distance(h, ref))
    if holiday[1] <= ref and _is_future(m, text):
        holiday = next(h for h in known if h[1] > ref)
    edge = m.group("edge")
    if edge in ("前", "之前"):
        return holiday[0] - timedelta(days=14), holiday[0]
    if edge in ("后", "之后"):
        return holiday[1], holiday[1] + timedelta(days=14)
    return holiday


# Ordered like the English table: overlapping matches are settled by `find_time_spans`
# (the longest wins), so "去年春天" beats "去年" and "上周三" beats "上周".
CHINESE_RULES: Final[tuple[tuple[re.Pattern[str], _Resolver], ...]] = (
    (
        re.compile(r"(?P<w>大前天|前天|昨天|昨日|昨晚|今天|今日|今早|今晚|明天|明日|大后天|后天)"),
        _r_day,
    ),
    (
        re.compile(
            r"(?P<n>" + _NUM + r"|几)(?:个)?(?P<u>天|" + _WEEK + r"|个月|年)(?:以前|之前|前)"
        ),
        _r_ago,
    ),
    (re.compile(r"(?P<rel>上|这|本|下)(?:个)?" + _WEEK + r"(?P<d>[一二三四五六日天末])?"), _r_week),
    (re.compile(r"(?P<rel>上|这|本|下)?(?:个)?月" + _PART), _r_month_rel),
    (
        re.compile(r"(?P<rel>上|这|本|下)(?:个)?月(?![初中底末0-9一二三四五六七八九十])"),
        _r_month_rel,
    ),
    (
        re.compile(
            r"(?P<y>前年|去年|今年|明年|后年)(?:(?P<s>[春夏秋冬])(?:天|季)"
            r"|(?P<mon>[0-9]{1,2}|十[一二]?|[一二三四五六七八九])月(?:(?P<d>[0-9]{1,2}|[一二三]?十[一二三四五六七八九]?|[一二三四五六七八九])[日号]"
            r"|(?P<mpart>上旬|中旬|下旬|初|中|底|末))?"
            r"|(?P<part>初|底|末))?"
        ),
        _r_year_rel,
    ),
    (
        re.compile(
            r"(?<![0-9])(?P<y>(?:19|20)[0-9]{2}|[一二][〇零一二三四五六七八九]{3})年"
            r"(?:(?P<mon>[0-9]{1,2}|十[一二]?|[一二三四五六七八九])月"
            r"(?:(?P<d>[0-9]{1,2}|[一二三]?十[一二三四五六七八九]?|[一二三四五六七八九])[日号]"
            r"|" + _PART + r")?)?"
        ),
        _r_absolute,
    ),
    (
        re.compile(
            r"(?<![0-9年])(?P<mon>1[0-2]|0?[1-9]|十[一二]?|[一二三四五六七八九])月"
            r"(?:(?P<d>[0-9]{1,2}|[一二三]?十[一二三四五六七八九]?|[一二三四五六七八九])[日号]"
            r"|" + _PART + r")?"
        ),
        _r_month_day,
    ),
    (
        re.compile(
            r"(?P<h>春节|过年|除夕|元旦|劳动节|国庆(?:节)?|情人节|圣诞(?:节)?"
            r"|(?<![0-9〇零一二两三四五六七八九十])(?:五一|十一)(?:假期|长假|期间|黄金周|节))"
            r"(?P<edge>之前|之后|前|后)?"
        ),
        _r_festival,
    ),
)
# Characters every expression above contains (Traditional forms too: the prefilter runs on
# the original text, the rules on the folded one).
CHINESE_PREFILTER: Final = re.compile(r"[天日晚早周週星礼禮月年节節夕旦庆慶假期诞誕]")


def chinese_label(first: date, after: date) -> str:
    """The range written the Chinese way: "2026年9月21日至27日", "2025年3月至5月"."""
    last = after - timedelta(days=1)
    if first == last:
        return f"{first.year}年{first.month}月{first.day}日"
    if first.day == 1 and after.day == 1:
        if (first.month, last.month, first.year) == (1, 12, last.year):
            return f"{first.year}年"
        if (first.year, first.month) == (last.year, last.month):
            return f"{first.year}年{first.month}月"
        if first.year == last.year:
            return f"{first.year}年{first.month}月至{last.month}月"
        return f"{first.year}年{first.month}月至{last.year}年{last.month}月"
    if (first.year, first.month) == (last.year, last.month):
        return f"{first.year}年{first.month}月{first.day}日至{last.day}日"
    if first.year == last.year:
        return f"{first.year}年{first.month}月{first.day}日至{last.month}月{last.day}日"
    return f"{first.year}年{first.month}月{first.day}日至{last.year}年{last.month}月{last.day}日"
