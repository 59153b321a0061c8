"""The import progress bar: documents, items, facts, rate and ETA on one line.

On a terminal the line is redrawn in place; into a file or pipe a plain line is written
only every LOG_INTERVAL_S, so logs stay readable.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO

from engram.client import ImportCounts

BAR_WIDTH = 24
LOG_INTERVAL_S = 10.0
# The rate is measured over what this watcher saw, once it has seen this long.
MIN_RATE_WINDOW_S = 1.0


def duration(seconds: float) -> str:
    """`0:07`, `12:34`, `1:02:03`."""
    whole = max(int(seconds + 0.5), 0)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def bar(fraction: float, width: int = BAR_WIDTH) -> str:
    filled = round(max(0.0, min(fraction, 1.0)) * width)
    return "[" + "#" * filled + "." * (width - filled) + "]"


@dataclass
class RateMeter:
    """Items per second since the first observation of this watcher."""

    first_at: float | None = None
    first_items: int = 0
    rate: float | None = None

    def observe(self, at: float, items: int) -> None:
        if self.first_at is None:
            self.first_at, self.first_items = at, items
            return
        elapsed = at - self.first_at
        if elapsed >= MIN_RATE_WINDOW_S and items > self.first_items:
            self.rate = (items - self.first_items) / elapsed

    def eta(self, remaining: int) -> float | None:
        if self.rate is None or self.rate <= 0:
            return None
        return remaining / self.rate


def render(counts: ImportCounts, rate: float | None, eta: float | None) -> str:
    total = counts.items_total or 1
    fraction = counts.items_done / total
    parts = [
        bar(fraction),
        f"{fraction:4.0%}",
        f"documents {counts.documents_done:,}/{counts.documents_total:,}",
        f"items {counts.items_done:,}/{counts.items_total:,}",
        f"facts {counts.facts_added:,}",
        f"{rate:,.1f} items/s" if rate is not None else "-- items/s",
        f"ETA {duration(eta)}" if eta is not None else "ETA --",
    ]
    if counts.documents_failed:
        parts.insert(3, f"({counts.documents_failed} failed)")
    return "  ".join(parts)


class ProgressDisplay:
    def __init__(self, out: TextIO, clock: Callable[[], float] = time.monotonic) -> None:
        self._out = out
        self._clock = clock
        self._tty = out.isatty()
        self._meter = RateMeter()
        self._last_line = ""
        self._logged_line = ""
        self._last_logged = float("-inf")
        self._drawn = False

    def update(self, counts: ImportCounts) -> None:
        now = self._clock()
        self._meter.observe(now, counts.items_done)
        eta = self._meter.eta(counts.items_total - counts.items_done)
        line = render(counts, self._meter.rate, eta)
        if self._tty:
            self._out.write("\r\x1b[2K" + line)
            self._drawn = True
        elif line != self._last_line and now - self._last_logged >= LOG_INTERVAL_S:
            self._out.write(line + "\n")
            self._last_logged = now
            self._logged_line = line
        self._last_line = line
        self._out.flush()

    def finish(self) -> None:
        """End the redrawn line so what follows starts on a fresh one."""
        if self._tty and self._drawn:
            self._out.write("\n")
        elif not self._tty and self._last_line and self._last_line != self._logged_line:
            self._out.write(self._last_line + "\n")
            self._logged_line = self._last_line
        self._out.flush()
        self._drawn = False
