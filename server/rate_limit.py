"""Per-key request rates: a token bucket per key, in this process (one server per stack)."""

from __future__ import annotations

from collections import OrderedDict

# Buckets kept; the least recently used key's bucket is dropped past this (it refills anyway).
MAX_BUCKETS = 10_000


class RateLimiter:
    """`rate` requests a minute on average, bursts of up to `rate` at once."""

    def __init__(self) -> None:
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # tokens, at

    def acquire(self, key: str, rate: int, now: float) -> float:
        """0 when the request may go; otherwise the seconds until it could."""
        tokens, at = self._buckets.get(key, (float(rate), now))
        tokens = min(float(rate), tokens + (now - at) * rate / 60.0)
        if tokens < 1.0:
            self._buckets[key] = (tokens, now)
            return (1.0 - tokens) * 60.0 / rate
        self._buckets[key] = (tokens - 1.0, now)
        self._buckets.move_to_end(key)
        if len(self._buckets) > MAX_BUCKETS:
            self._buckets.popitem(last=False)
        return 0.0
