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
  future ("will", "'ll", "going to", "I'm going camping", "how about" ...), then the next
  one; "this Friday" is 0–6 days back, or 0–6 days ahead in a future sentence.
- A month or day without a year ("in May", "on 8 May") is the most recent one on or before the
  reference, or the next one on or after it when the sentence speaks of the future.
- Seasons are northern meteorological: spring Mar–May, summer Jun–Aug, autumn/fall Sep–Nov,
  winter Dec–Feb, named by the year it starts ("winter 2022" is Dec 2022–Feb 2023).
  "last spring" is the most recent spring that ended on or before the reference day.
- "8/5/2023" is read US style (month/day) unless the first number exceeds 12; "8.5.2023" is
  day.month. Two-number forms ("8/5") and bare numbers are never dates; bare years only count
  after a preposition ("in 2022", "since 2016"), except in `parse_query_window`.
- "early/mid/late X", "the end of X" split X into thirds (by months for a year or season,
  by days for a month); "first/last week(end) of X" pick that week or weekend.
- "Q3 2023" (or "q3 2023") / "the third quarter of 2023" and "H1 2023" / "the first half of
  2023" are those months.
- "the last decade" / "the past two decades" are the 10 (20) years up to the reference day,
  as "the past year" is; "this decade" its ten calendar years (2020–2029).
- "from 2019 to 2021", "2019–2021" and "between 2019 and 2021" are both years whole; "the
  1990s" is 1990–1999 ("the 1900s" and "the 2000s" may be centuries: no date). Clock times
  are not handled.
- A preposition does not choose between overlapping readings: "since May 2020" is May 2020,
  not "since May" of the reference year. Only a query's window (`parse_query_window`) reads
  it: "before 2020", "until 2019" and "by 2019" end the window, "since 2020" and "after
  2019" start it, as "June 2023 onwards", "from June 2023 on" and "2022 and later" do (a
  bare "from June 2023" stays June: "photos from June 2023"), the other side left open
  (engine/limits.py's instants); a time counted
  from the one named is read from it: "the week before 3 August 2023" is 27 July–2 August
  ("N weeks ago" said on 3 August), "the Saturday after 28 October 2023" is 4 November.
"""

from engine.dates.spans import TimeSpan, find_time_spans, merge_spans, parse_query_window

__all__ = ["TimeSpan", "find_time_spans", "merge_spans", "parse_query_window"]
