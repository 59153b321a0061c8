"""Every activity's timeout and retry policy, named in one place.

Policies name no error types: an error that a retry cannot help arrives as a non-retryable
failure already (activities/failures.py, from the error class's `retryable`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from temporalio.common import RetryPolicy

# Every activity heartbeats (worker/heartbeat.py), so a dead worker's attempt is retried
# after this long instead of after its whole start-to-close timeout.
HEARTBEAT_TIMEOUT = timedelta(seconds=10)


@dataclass(frozen=True)
class ActivityPolicy:
    start_to_close: timedelta
    retry: RetryPolicy
    heartbeat: timedelta = HEARTBEAT_TIMEOUT


_FAST_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=200),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
    maximum_attempts=8,
)

# Database steps are short; a retry covers a dropped connection or a deadlock.
DATABASE = ActivityPolicy(timedelta(minutes=2), _FAST_RETRY)
# Extraction may call an LLM: long timeout, patient retries (rate limits, 5xx).
EXTRACT = ActivityPolicy(
    timedelta(minutes=10),
    RetryPolicy(
        initial_interval=timedelta(seconds=1),
        backoff_coefficient=2.0,
        maximum_interval=timedelta(minutes=2),
        maximum_attempts=6,
    ),
)
# Embedding is local CPU work bounded by batch size, but a call waits its turn in document
# order (engine/retain/gate.py): the last document of a large import waits for every one
# before it, minutes on a loaded machine. The heartbeat, not this timeout, catches a dead
# worker, so it is generous (5 minutes cancelled waiting calls during a LoCoMo import).
EMBED = ActivityPolicy(timedelta(minutes=30), _FAST_RETRY)
# Reflect: one model turn. A timeout, 5xx or rate limit is retried with backoff (the
# client's own timeout, ENGRAM_LLM_TIMEOUT, ends a hung call first); a refusal (4xx) is not.
REFLECT_MODEL = ActivityPolicy(
    timedelta(minutes=5),
    RetryPolicy(
        initial_interval=timedelta(seconds=1),
        backoff_coefficient=2.0,
        maximum_interval=timedelta(seconds=30),
        maximum_attempts=5,
    ),
)
# Reflect: one tool call (a search or an expand), database and local CPU work.
REFLECT_TOOL = ActivityPolicy(
    timedelta(minutes=2),
    RetryPolicy(
        initial_interval=timedelta(milliseconds=200),
        backoff_coefficient=2.0,
        maximum_interval=timedelta(seconds=30),
        maximum_attempts=8,
    ),
)
# Bookkeeping of operation status; must not be the reason a retain fails.
# A webhook send: a receiver that is down or answers non-2xx gets 6 tries over ~30 s
# (1, 2, 4, 8, 16 s apart), then the delivery is marked failed.
WEBHOOK = ActivityPolicy(
    timedelta(seconds=30),
    RetryPolicy(
        initial_interval=timedelta(seconds=1),
        backoff_coefficient=2.0,
        maximum_interval=timedelta(seconds=30),
        maximum_attempts=6,
    ),
)
BOOKKEEPING = ActivityPolicy(timedelta(seconds=30), _FAST_RETRY)

# Fan-out bounds: chunks per extraction activity, facts per embedding or linking activity,
# child workflows running at once per request, and documents per child when ids are derived.
EXTRACT_BATCH = 4
EMBED_BATCH = 128
LINK_BATCH = 64
MAX_PARALLEL_CHILDREN = 8
IMPLICIT_DOCUMENTS_PER_CHILD = 32
# How long a retain waits between attempts to start a document that another retain is
# still writing (per-document workflow ids serialise them).
DOCUMENT_BUSY_WAIT = timedelta(seconds=1)
