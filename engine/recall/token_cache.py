"""An in-process cache of the facts' stored token vectors, so MaxSim reads them once.

A recall at 100k facts reranks ~80 candidates, and with their chunk neighbours reads ~400
token-vector blobs of ~8 kB: 3 MB per query detoasted by PostgreSQL, sent over the socket
and received by asyncpg. Measured at 100k facts (bench/recall_latency.py's bank, 80 random
candidates, loaded machine): the neighbour read took 28 ms with the blobs and 4 ms without,
the candidate rows 11 ms and 6 ms. Blobs of frequently recalled facts are kept here.

Keyed by fact id and `memory_units.updated_at`: a fact's text never changes under its id
(ids hash the chunk's content), and an observation rewritten by consolidation gets a new
`updated_at`, so a stale blob is never served. Least recently used blobs go first once
`capacity_bytes` is reached; 0 disables the cache. Used from the event loop only.
"""

from __future__ import annotations

from collections import OrderedDict
from datetime import datetime

DEFAULT_CAPACITY_MB = 256


class TokenVectorCache:
    def __init__(self, capacity_bytes: int) -> None:
        self._capacity = max(0, capacity_bytes)
        self._entries: OrderedDict[str, tuple[datetime, bytes]] = OrderedDict()
        self._bytes = 0
        self._generation = 0
        self._epoch = 0

    @property
    def enabled(self) -> bool:
        return self._capacity > 0

    @property
    def size_bytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, fact_id: object) -> bool:
        """Whether some version of the fact is held."""
        return fact_id in self._entries

    def get(self, fact_id: str, version: datetime) -> bytes | None:
        """The blob stored for this version of the fact, or None."""
        entry = self._entries.get(fact_id)
        if entry is None or entry[0] != version:
            return None
        self._entries.move_to_end(fact_id)
        return entry[1]

    def put(self, fact_id: str, version: datetime, blob: bytes) -> None:
        if len(blob) > self._capacity:
            return
        old = self._entries.pop(fact_id, None)
        if old is not None:
            self._bytes -= len(old[1])
        self._entries[fact_id] = (version, blob)
        self._bytes += len(blob)
        while self._bytes > self._capacity:
            _, (_, evicted) = self._entries.popitem(last=False)
            self._bytes -= len(evicted)

    @property
    def generation(self) -> int:
        """Counts `discard` and `clear` calls: a warm (warm_token_cache) that read rows
        before one of them must not keep what it read."""
        return self._generation

    @property
    def epoch(self) -> int:
        """Counts `clear` calls: what a warm read before one is gone, so banks are warmed
        again (RecallEngine.warm)."""
        return self._epoch

    def offer(self, fact_id: str, version: datetime, blob: bytes) -> bool:
        """Keep the blob if it fits without evicting anything and no version of the fact is
        held; False once the cache is full (a warm stops there)."""
        if fact_id in self._entries:
            return True
        if self._bytes + len(blob) > self._capacity:
            return False
        self._entries[fact_id] = (version, blob)
        self._entries.move_to_end(fact_id, last=False)  # first to go: never used yet
        self._bytes += len(blob)
        return True

    def drop(self, fact_ids: list[str]) -> None:
        """Forget these blobs, as eviction would (a warm undoing itself)."""
        for fact_id in fact_ids:
            entry = self._entries.pop(fact_id, None)
            if entry is not None:
                self._bytes -= len(entry[1])

    def discard(self, fact_ids: list[str]) -> int:
        """Drop the blobs of these facts (erasure: nothing of a forgotten fact stays in the
        process); returns how many were held."""
        self._generation += 1
        dropped = 0
        for fact_id in fact_ids:
            entry = self._entries.pop(fact_id, None)
            if entry is not None:
                self._bytes -= len(entry[1])
                dropped += 1
        return dropped

    def clear(self) -> None:
        """Drop every blob (the database was re-embedded: they are the old model's)."""
        self._generation += 1
        self._epoch += 1
        self._entries.clear()
        self._bytes = 0
