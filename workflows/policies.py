"""Every activity's timeout and retry policy, named in one place.

Policies name no error types: an error that a retry cannot help arrives as a non-retryable
failure already (activities/failures.py, from the error class's `retryable`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import TypedDict

from temporalio.common import RetryPolicy

# Every activity heartbeats (worker/heartbeat.py), so a dead worker's attempt is retried
# after this long instead of after its whole start-to-close timeout.
HEARTBEAT_TIMEOUT = timedelta(seconds=10)


@dataclass(frozen=True)
class ActivityPolicy:
    start_to_close: timedelta
    retry: RetryPolicy
    heartbeat: timedelta = HEARTBEAT_TIMEOUT


class ActivityOptions(TypedDict):
    start_to_close_timeout: timedelta
    retry_policy: RetryPolicy
    heartbeat_timeout: timedelta


def options(policy: ActivityPolicy) -> ActivityOptions:
    """The keyword arguments of `workflow.execute_activity*` for a named policy."""
    return {
        "start_to_close_timeout": policy.start_to_close,
        "retry_policy": policy.retry,
        "heartbeat_timeout": policy.heartbeat,
    }


_FAST_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=200),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
    maximum_attempts=8,
)

# Database steps are short; a retry covers a dropped connection or a deadlock.
DATABASE = ActivityPolicy(timedelta(minutes=2), _FAST_RETRY)
# Storing a batch's documents is one transaction, as long as their facts make it: a
# 990,000-character Chinese document's ~110,000 facts took longer than DATABASE's 2 minutes,
# and every retry started over. It heartbeats, so the heartbeat, not this timeout, catches a
# dead worker.
UPSERT = ActivityPolicy(timedelta(minutes=30), _FAST_RETRY)
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
# A bank's archive written or imported whole in one activity: long for a large bank, but the
# heartbeat catches a dead worker, and a retried import resumes from its last committed batch
# (engine/transfer/restore.py).
TRANSFER = ActivityPolicy(timedelta(hours=6), _FAST_RETRY)
# LLM supersession after the upsert (one model call per new fact): a timeout, 5xx or rate
# limit is retried with backoff; when the retries are spent the pipeline goes on with what
# the local rules decided in the upsert (workflows/pipeline.py).
SUPERSEDE = ActivityPolicy(
    timedelta(minutes=10),
    RetryPolicy(
        initial_interval=timedelta(seconds=1),
        backoff_coefficient=2.0,
        maximum_interval=timedelta(minutes=1),
        maximum_attempts=4,
    ),
)

# Fan-out bounds of the document pipeline (workflows/pipeline.py).
# Chunks per extract_facts call. Every activity costs Temporal history events and server CPU
# (~68 ms of dev-server CPU each, measured on a LoCoMo import): with 4 per call LoCoMo made 154
# calls and the server spent 18.8 CPU s, with 16, 43 calls and 11.2-11.7 CPU s. The chunks of
# one call are still extracted concurrently in the CPU pool.
EXTRACT_BATCH = 16
# Without a model (local or no extraction), a call is a millisecond of CPU a chunk and cannot
# fail for a rate limit, so one call takes a whole batch's chunks: 16 a call still made seven
# calls for every 100 one-message documents.
LOCAL_EXTRACT_BATCH = 512
# ... and at most about this many characters a call: a call returns the ids of the facts it
# staged, ~40 bytes each, and a text of 1,000,000 characters in short sentences (Chinese:
# ~20 characters a sentence, 3 bytes each) made ~110,000 facts, a 4.3 MB result that
# Temporal refuses (its payload limit is 2 MB). 100,000 characters of one-word sentences
# make ~25,000 facts, ~1 MB; 512 chat turns of ~130 characters still fit in one call.
EXTRACT_CHARS = 100_000
# Activity calls over a batch's fact ids (embed, resolve, link) running at once: 16 of 1,024
# ids are ~650 kB of commands in one workflow task, a fraction of Temporal's 4 MB message
# limit, and more than a 2-core worker runs at once anyway.
FACT_CALLS = 16
# The embedding step runs on a task queue of its own, next to the one named in the settings
# (worker/main.py `Workers`): its slots are the CPU pool's threads, so calls waiting for
# the model wait in Temporal, not in the task queue's activity slots.
EMBED_ACTIVITY = "embed_facts"


def embed_queue(task_queue: str) -> str:
    return f"{task_queue}.embed"


# Facts per embed_facts call. One call runs its model batches through the worker's ordered
# gate in its batch's order; a few large calls keep the worker's activity slots free for other
# batches' link and upsert steps (with one call per 128 facts, calls waiting their turn filled
# all 32 slots and the first document could not link until the last one had embedded).
EMBED_BATCH = 1024
# Facts per link_facts call. Each call first loads the bank's in-flight staged facts (up to
# links.IN_FLIGHT_LIMIT), so linking in large batches pays that fixed cost less often. LoCoMo:
# 256 took 61 calls and 239 s of activity time, 1024 took 19 calls and 108 s (loaded machine).
LINK_BATCH = 1024
# New facts per supersede_facts call (each fact is one model call, made in turn).
SUPERSEDE_BATCH = 32
# Facts per resolve_entities call (one transaction each).
RESOLVE_BATCH = 1024
# Documents per batch workflow, and items (or import records) per batch: many small documents
# share one batch's activities (about nine per batch, not six per document); a large one
# fills a batch alone. A batch holds at least BATCH_LEAST records even when that leaves fewer
# than MAX_PARALLEL_BATCHES batches: activities cost Temporal CPU (dev server and the worker's
# SDK), which at 25 one-message documents a batch was a third of all the CPU of the reference
# client's pattern (200 of them per request), 4.5 ms a turn at 100 and 3.8 at 200
# (docs/benchmarks.md, "Retain throughput").
BATCH_LEAST = 200
BATCH_DOCUMENTS = 256
BATCH_RECORDS = 512
# Batch workflows running at once per operation.
MAX_PARALLEL_BATCHES = 8
# Staged document references fetched per activity call.
PAGE = 256
# A writer waiting for a document another write holds is signalled when it is released; it
# also looks again after this long, which only matters if the holder's workflow was
# terminated without releasing (its claim is then stale, engine/retain/claims.py).
CLAIM_RECHECK = timedelta(seconds=30)
