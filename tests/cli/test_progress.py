"""The progress line: counts, rate and ETA from what the watcher saw, redrawn on a terminal."""

from __future__ import annotations

import io

from engram.client import ImportCounts
from engram.progress import ProgressDisplay, duration, render


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def counts(items: int, documents: int = 1, facts: int = 0) -> ImportCounts:
    return ImportCounts(
        documents_total=4,
        documents_done=documents,
        items_total=1000,
        items_done=items,
        facts_added=facts,
    )


def test_the_line_shows_documents_items_facts_rate_and_eta() -> None:
    line = render(counts(250, documents=1, facts=600), rate=50.0, eta=15.0)
    assert line.startswith("[######..................]   25%")
    assert "documents 1/4" in line and "items 250/1,000" in line and "facts 600" in line
    assert "50.0 items/s" in line and "ETA 0:15" in line
    assert "-- items/s" in render(counts(0), rate=None, eta=None)


def test_rate_and_eta_come_from_the_observed_progress_and_redraw_in_place() -> None:
    out, clock = Terminal(), Clock()
    display = ProgressDisplay(out, clock)
    display.update(counts(100))
    clock.now += 10
    display.update(counts(300))
    display.finish()
    frames = out.getvalue().split("\r\x1b[2K")
    assert len(frames) == 3 and frames[-1].endswith("\n")
    assert "-- items/s" in frames[1]
    assert "20.0 items/s" in frames[2] and "ETA 0:35" in frames[2]


def test_a_pipe_gets_plain_lines_and_always_the_last_one() -> None:
    out, clock = io.StringIO(), Clock()
    display = ProgressDisplay(out, clock)
    display.update(counts(100))
    clock.now += 1
    display.update(counts(200))
    display.finish()
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and "items 100/" in lines[0] and "items 200/" in lines[1]
    assert "\r" not in out.getvalue()


def test_durations_read_like_a_clock() -> None:
    assert [duration(s) for s in (7, 754, 3723)] == ["0:07", "12:34", "1:02:03"]
