"""Per-bank graphs in memory, so the graph arm's walk sends no statement (graph_memory.py).

Exact, not eventually: a bank's graph is read in one REPEATABLE READ transaction and keeps
that transaction's snapshot. Every write that changes what the walk reads (facts inserted or
deleted, a fact's state, tags, type or embedding, links, entity mentions, index terms, the
bank's statistics) adds its transaction to `bank_changes` (migration 0031), and each recall
asks, in one index probe run while the query is embedded, whether a transaction the snapshot
did not see has changed the bank. If one has, the graph is dropped on the spot (that recall
walks in SQL, as before) and read again in the background. So an erased, deleted, archived
or superseded fact is never walked once its transaction has committed before the recall
starts, the same as the SQL path, whose statements also read whatever had committed by then;
several server processes each keep and check their own copy.

Bounded: the graphs of all banks together stay under `capacity` bytes (least recently used
bank dropped first); a bank whose estimated size is over it is not read at all and keeps the
SQL path. Measured at 100k facts: ~1.4 kB a fact (docs/benchmarks.md "Tenth pass",
"Twelfth pass" and "Keyword arm from memory"), most of it the 384 float16 dimensions of each
embedding (768 B); the temporal arm's dates (25 B) and temporal links (~10 a fact, 8 B each)
~100 B of it, the keyword arm's postings ~80 B (engine/recall/postings.py: 12.8 postings a
fact at 6 B, and its length), the rerank context's timeline 40 B (engine/recall/timeline.py).

The temporal arm reads the same graph (engine/recall/temporal_memory.py): every write of a
fact's dates sets its `updated_at` (consolidation, correction), which the update trigger
counts, so dates are exact on the same terms. So do the keyword arm
(engine/recall/keyword_memory.py): its postings are read in the graph's snapshot, and the
rerank's context (engine/recall/context_memory.py).

`bank_changes` is pruned by every server process, whether or not it keeps graphs
(`ChangePruner`, a task of the server's): every `max_age` (an hour) it deletes the rows of
transactions that had ended when it last looked (`xid` below that time's oldest running
transaction), and no graph is kept longer than `max_age`, so every graph alive was read after
those transactions ended and sees their writes: the rows it would need are never the ones
deleted. A 100k-fact bank is then read again once an hour (~15-30 s of one PostgreSQL
backend, walked in SQL meanwhile). With no server running, the rows wait for the next one.

A bank that is written continuously is re-read after every change it sees and walked in SQL
meanwhile: the cache helps banks that are read more than written, the common case for a
memory whose writes arrive in bursts.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import Executor

import asyncpg
import numpy as np
from numpy.typing import NDArray

from engine.db import Pool
from engine.recall.config import BUDGETS, RecallConfig
from engine.recall.graph_memory import (
    LINK_TYPES,
    PG_EPOCH,
    STATES,
    BankGraph,
    Dates,
    Entities,
    Facts,
    Links,
    Snapshot,
    TemporalLinks,
    Terms,
    csr_of,
    invert,
)
from engine.recall.postings import PostingRows, postings_of, read_postings
from engine.recall.timeline import read_timeline, timeline_of
from engine.recall.types import FACT_TYPES

log = logging.getLogger(__name__)

# Estimated bytes a fact costs before a bank is read (measured after: BankGraph.nbytes).
BYTES_PER_FACT = 1420
# A bank too large for the capacity is looked at again after this long (it may have shrunk).
RETRY_TOO_LARGE_S = 600.0
# The longest a graph is kept, and how often `bank_changes` is pruned (see above).
MAX_AGE_S = 3600.0

_CHANGED = """
SELECT EXISTS (SELECT 1 FROM bank_changes WHERE bank_id = $1 AND xid >= $2::text::xid8
               AND NOT pg_visible_in_snapshot(xid, $3::text::pg_snapshot))
"""

_MARK = "SELECT pg_snapshot_xmin(pg_current_snapshot())::text"
_PRUNE = "DELETE FROM bank_changes WHERE xid < $1::text::xid8"

_HEAD = """
SELECT pg_current_snapshot()::text AS snapshot,
       pg_snapshot_xmin(pg_current_snapshot())::text AS xmin,
       coalesce((SELECT unit_count FROM bank_stats WHERE bank_id = $1), 0)::float8 AS n,
       (SELECT count(*) FROM memory_units WHERE bank_id = $1) AS facts
"""

# One row of byte strings: a row per fact left ~100k Python objects interleaved with the
# ids kept, so the process kept ~2x the graph's size resident after reading it.
_FACTS = """
SELECT count(*) AS n,
       string_agg(uuid_send(id), ''::bytea ORDER BY id) AS ids,
       string_agg(halfvec_send(embedding), ''::bytea ORDER BY id) AS embeddings,
       string_agg(int2send((array_position($2::text[], fact_type) - 1)::int2), ''::bytea
                  ORDER BY id) AS types,
       string_agg(int2send((array_position($3::text[], state) - 1)::int2), ''::bytea
                  ORDER BY id) AS states,
       string_agg(timestamptz_send(coalesce(occurred_start, $4)), ''::bytea ORDER BY id)
           AS starts,
       string_agg(timestamptz_send(coalesce(occurred_end, occurred_start, $4)), ''::bytea
                  ORDER BY id) AS ends,
       string_agg(timestamptz_send(coalesce(mentioned_at, $4)), ''::bytea ORDER BY id)
           AS mentioned,
       string_agg(int2send(((occurred_start IS NOT NULL)::int
                            + 2 * (mentioned_at IS NOT NULL)::int)::int2), ''::bytea
                  ORDER BY id) AS dated
FROM memory_units WHERE bank_id = $1
"""

# Facts numbered in id order, as _FACTS returns them (same snapshot). Links and mentions are
# reached from the bank's facts (their indexes), not by bank_id, which no index covers: in a
# database of many banks that was a scan of every bank's links. Lists of numbers come
# as big-endian bytes (`int4send` ...), one value per row instead of a Python object each:
# as int[] arrays the 100k bank's links alone were ~2M Python ints while reading.
_NUMBERED = """
u AS (SELECT id, (row_number() OVER (ORDER BY id) - 1)::int AS i
      FROM memory_units WHERE bank_id = $1)
"""

_TAGS = f"""
WITH {_NUMBERED}
SELECT u.i, m.tags FROM memory_units m JOIN u ON u.id = m.id
WHERE m.bank_id = $1 AND cardinality(m.tags) > 0
"""

_LINKS = f"""
WITH {_NUMBERED},
e AS (SELECT l.from_unit AS a, l.to_unit AS b, l.link_type, l.weight
      FROM u JOIN memory_links l ON l.from_unit = u.id
      UNION ALL
      SELECT l.to_unit, l.from_unit, l.link_type, l.weight
      FROM u JOIN memory_links l ON l.to_unit = u.id),
r AS (SELECT ua.i AS a, ub.i AS b, e.weight,
             array_position($3::text[], e.link_type)::int - 1 AS kind,
             row_number() OVER (PARTITION BY ua.i ORDER BY e.weight DESC, e.b) AS k
      FROM e JOIN u ua ON ua.id = e.a JOIN u ub ON ub.id = e.b)
SELECT a, string_agg(int4send(b), ''::bytea ORDER BY k) AS other,
       string_agg(float4send(weight), ''::bytea ORDER BY k) AS weight,
       string_agg(int2send(kind::int2), ''::bytea ORDER BY k) AS kind
FROM r WHERE k <= $2 GROUP BY a
"""

# engine/recall/temporal.py's spread: temporal links alone, in the order its statement reads
# them (weight, then the other fact's id), the widest budget's fanout of them.
_TEMPORAL = f"""
WITH {_NUMBERED},
e AS (SELECT l.from_unit AS a, l.to_unit AS b, l.weight
      FROM u JOIN memory_links l ON l.from_unit = u.id AND l.link_type = 'temporal'
      UNION ALL
      SELECT l.to_unit, l.from_unit, l.weight
      FROM u JOIN memory_links l ON l.to_unit = u.id AND l.link_type = 'temporal'),
r AS (SELECT ua.i AS a, ub.i AS b, e.weight,
             row_number() OVER (PARTITION BY ua.i ORDER BY e.weight DESC, e.b) AS k
      FROM e JOIN u ua ON ua.id = e.a JOIN u ub ON ub.id = e.b)
SELECT a, string_agg(int4send(b), ''::bytea ORDER BY k) AS other,
       string_agg(float4send(weight), ''::bytea ORDER BY k) AS weight
FROM r WHERE k <= $2 GROUP BY a
"""

_ENTITIES = f"""
WITH {_NUMBERED},
p AS (SELECT ue.entity_id, string_agg(int4send(u.i), ''::bytea ORDER BY u.i) AS units
      FROM u JOIN unit_entities ue ON ue.unit_id = u.id GROUP BY ue.entity_id)
SELECT e.id::text AS id, e.canonical_name, e.normalized_name, e.aliases_normalized,
       e.mention_count, CASE WHEN e.mention_count <= $2 THEN p.units END AS units
FROM entities e LEFT JOIN p ON p.entity_id = e.id
WHERE e.bank_id = $1 ORDER BY e.id
"""

_TERMS = f"""
WITH {_NUMBERED},
st AS (SELECT term, df, (row_number() OVER (ORDER BY term))::int AS r FROM bank_term_stats
       WHERE bank_id = $1 AND df BETWEEN 2 AND $2 AND term !~ '^[0-9]+$')
SELECT st.term, st.df, st.r, string_agg(int4send(u.i), ''::bytea ORDER BY u.i) AS units
FROM st JOIN memory_terms t ON t.bank_id = $1 AND t.term = st.term
JOIN u ON u.id = t.unit_id
GROUP BY st.term, st.df, st.r
"""


class GraphCache:
    """The process's cached bank graphs (engine/recall/engine.py asks `fresh` per recall)."""

    def __init__(
        self,
        pool: Pool,
        cpu: Executor,
        capacity: int,
        *,
        max_fanout: int,
        max_entity_mentions: int,
        max_term_df: int,
        max_age: float = MAX_AGE_S,
    ) -> None:
        self._pool = pool
        self._cpu = cpu
        self.capacity = capacity
        self._max_fanout = max_fanout
        self._max_entity_mentions = max_entity_mentions
        self._max_term_df = max_term_df
        self._graphs: OrderedDict[str, BankGraph] = OrderedDict()
        self._too_large: dict[str, float] = {}
        self._reading: dict[str, asyncio.Task[BankGraph | None]] = {}
        self._max_age = max_age

    @property
    def nbytes(self) -> int:
        return sum(g.nbytes for g in self._graphs.values())

    def banks(self) -> list[str]:
        return list(self._graphs)

    async def fresh(self, bank_id: str) -> BankGraph | None:
        """The bank's graph if no write has changed it since it was read; otherwise None
        (walk in SQL), and the bank is read again in the background."""
        graph = self._graphs.get(bank_id)
        if graph is not None:
            async with self._pool.acquire() as conn:
                changed = await conn.fetchval(
                    _CHANGED, bank_id, graph.read.xmin, graph.read.snapshot
                )
            if not changed and time.monotonic() - graph.read.started < self._max_age:
                self._graphs.move_to_end(bank_id)
                return graph
            if self._graphs.get(bank_id) is graph:
                del self._graphs[bank_id]
        self._read_later(bank_id)
        return None

    async def read(self, bank_id: str) -> BankGraph | None:
        """Read the bank's graph now and keep it (None: over the capacity)."""
        too_large = self._too_large.get(bank_id)
        if too_large is not None and time.monotonic() - too_large < RETRY_TOO_LARGE_S:
            return None
        graph = await self._load(bank_id)
        if graph is None or graph.nbytes > self.capacity:
            self._too_large[bank_id] = time.monotonic()
            return None
        self._too_large.pop(bank_id, None)
        self._graphs[bank_id] = graph
        self._graphs.move_to_end(bank_id)
        while self.nbytes > self.capacity:
            self._graphs.popitem(last=False)
        return graph

    def clear(self) -> None:
        self._graphs.clear()

    async def close(self) -> None:
        tasks = list(self._reading.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _read_later(self, bank_id: str) -> None:
        if bank_id in self._reading or self.capacity <= 0:
            return
        task = asyncio.create_task(self.read(bank_id), name=f"engram-graph-{bank_id}")
        self._reading[bank_id] = task
        task.add_done_callback(lambda done: self._read_done(bank_id, done))

    def _read_done(self, bank_id: str, task: asyncio.Task[BankGraph | None]) -> None:
        self._reading.pop(bank_id, None)
        if task.cancelled():
            return
        error = task.exception()
        if error is not None:
            log.error("reading bank %s's graph failed: walked in SQL", bank_id, exc_info=error)

    async def _load(self, bank_id: str) -> BankGraph | None:
        started = time.monotonic()
        async with (
            self._pool.acquire() as conn,
            conn.transaction(isolation="repeatable_read", readonly=True),
        ):
            head = await conn.fetchrow(_HEAD, bank_id)
            assert head is not None  # one row, always
            if head["facts"] * BYTES_PER_FACT > self.capacity:
                return None
            facts = await conn.fetchrow(_FACTS, bank_id, list(FACT_TYPES), list(STATES), PG_EPOCH)
            tags = await conn.fetch(_TAGS, bank_id)
            links = await conn.fetch(_LINKS, bank_id, self._max_fanout, list(LINK_TYPES))
            temporal = await conn.fetch(_TEMPORAL, bank_id, self._max_fanout)
            entities = await conn.fetch(_ENTITIES, bank_id, self._max_entity_mentions)
            terms = await conn.fetch(_TERMS, bank_id, self._max_term_df)
            postings = await read_postings(conn, bank_id)
            timeline = await read_timeline(conn, bank_id)
        read = Snapshot(head["snapshot"], head["xmin"], float(head["n"]), started)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            self._cpu,
            _build,
            bank_id,
            read,
            facts,
            tags,
            (links, temporal),
            entities,
            terms,
            postings,
            timeline,
        )


class ChangePruner:
    """Deletes the `bank_changes` rows no graph can need (module docstring): each call of
    `prune` deletes the rows of transactions that had ended at the previous call, then notes
    the oldest transaction running now. `run` calls it every `max_age`."""

    def __init__(self, pool: Pool, max_age: float = MAX_AGE_S) -> None:
        self._pool = pool
        self._max_age = max_age
        self._mark: str | None = None  # the oldest running transaction at the previous call

    async def prune(self) -> None:
        async with self._pool.acquire() as conn:
            if self._mark is not None:
                await conn.execute(_PRUNE, self._mark)
            self._mark = await conn.fetchval(_MARK)

    async def run(self) -> None:
        while True:
            try:
                await self.prune()
            except (OSError, asyncpg.PostgresError) as error:  # the next round tries again
                log.warning("pruning bank_changes failed: %s", error)
            await asyncio.sleep(self._max_age)


def graph_cache_for(config: RecallConfig, pool: Pool, cpu: Executor, capacity: int) -> GraphCache:
    """A graph cache holding what `config`'s walks read (the widest budget's fanout)."""
    return GraphCache(
        pool,
        cpu,
        capacity,
        max_fanout=max(config.budget(name).graph_fanout for name in BUDGETS),
        max_entity_mentions=config.max_entity_mentions,
        max_term_df=config.graph_max_term_df,
    )


def _build(
    bank_id: str,
    read: Snapshot,
    fact_row: asyncpg.Record | None,
    tag_rows: Sequence[asyncpg.Record],
    link_rows: tuple[Sequence[asyncpg.Record], Sequence[asyncpg.Record]],
    entity_rows: Sequence[asyncpg.Record],
    term_rows: Sequence[asyncpg.Record],
    posting_rows: PostingRows,
    timeline_row: asyncpg.Record | None,
) -> BankGraph:
    """The arrays of graph_memory.py from the rows read (CPU: the thread pool)."""
    size = int(fact_row["n"]) if fact_row is not None else 0
    hexed = fact_row["ids"].hex() if size and fact_row is not None else ""
    ids = [
        f"{hexed[k : k + 8]}-{hexed[k + 8 : k + 12]}-{hexed[k + 12 : k + 16]}-"
        f"{hexed[k + 16 : k + 20]}-{hexed[k + 20 : k + 32]}"
        for k in range(0, 32 * size, 32)
    ]
    packed = fact_row["embeddings"] if size and fact_row is not None else b""
    width = len(packed) // size if size else 4
    rows = np.frombuffer(packed, dtype=np.uint8).reshape(size, width)[:, 4:]
    embeddings = rows.view(">f2").astype(np.float16)
    del rows, packed
    # In slices: the whole bank as float32 at once was 150 MB more at 100k facts.
    squares = np.empty(size, dtype=np.float32)
    for start in range(0, size, 8192):
        part = embeddings[start : start + 8192].astype(np.float32)
        squares[start : start + 8192] = np.einsum("ij,ij->i", part, part)
    facts = Facts(
        ids=ids,
        index={u: i for i, u in enumerate(ids)},
        embeddings=embeddings,
        squares=squares,
        types=_small(fact_row, "types", size),
        states=_small(fact_row, "states", size),
        tags={r["i"]: frozenset(r["tags"]) for r in tag_rows},
    )
    merged, temporal_rows = link_rows
    by_fact: list[bytes] = [b""] * size
    weights: list[bytes] = [b""] * size
    kinds: list[bytes] = [b""] * size
    for r in merged:
        by_fact[r["a"]], weights[r["a"]], kinds[r["a"]] = r["other"], r["weight"], r["kind"]
    other = csr_of(by_fact)
    links = Links(
        starts=other.starts,
        other=other.values,
        weight=np.frombuffer(b"".join(weights), dtype=">f4").astype(np.float32),
        kind=np.frombuffer(b"".join(kinds), dtype=">i2").astype(np.int8),
    )
    by_fact, weights = [b""] * size, [b""] * size
    for r in temporal_rows:
        by_fact[r["a"]], weights[r["a"]] = r["other"], r["weight"]
    other = csr_of(by_fact)
    temporal = TemporalLinks(
        starts=other.starts,
        other=other.values,
        weight=np.frombuffer(b"".join(weights), dtype=">f4").astype(np.float32),
    )
    del by_fact, weights
    flags = _small(fact_row, "dated", size)
    dates = Dates(
        start=_instants(fact_row, "starts", size),
        end=_instants(fact_row, "ends", size),
        mentioned_at=_instants(fact_row, "mentioned", size),
        dated=(flags & 1) > 0,
        mentioned=(flags & 2) > 0,
    )
    by_name: dict[str, list[int]] = {}
    for e, r in enumerate(entity_rows):
        for key in {r["normalized_name"], *r["aliases_normalized"]}:
            by_name.setdefault(key, []).append(e)
    entity_units = csr_of([r["units"] or b"" for r in entity_rows])
    entities = Entities(
        ids=[r["id"] for r in entity_rows],
        names=[r["canonical_name"] for r in entity_rows],
        mentions=np.array([r["mention_count"] for r in entity_rows], dtype=np.int32),
        order=np.arange(len(entity_rows), dtype=np.int32),
        units=entity_units,
        of_fact=invert(entity_units, size),
        by_name={k: tuple(v) for k, v in by_name.items()},
    )
    term_units = csr_of([r["units"] for r in term_rows])
    terms = Terms(
        names=[r["term"] for r in term_rows],
        df=np.array([r["df"] for r in term_rows], dtype=np.int32),
        collation=np.array([r["r"] for r in term_rows], dtype=np.int32),
        units=term_units,
        of_fact=invert(term_units, size),
    )
    postings = postings_of(posting_rows, size)
    timeline = timeline_of(timeline_row, dates.mentioned_at, dates.mentioned, size)
    nbytes = (
        postings.nbytes
        + embeddings.nbytes
        + facts.squares.nbytes
        + 2 * size
        # ids: a 36-character str (~85 B) and its dict entry (~100 B) per fact
        + 185 * size
        + links.starts.nbytes
        + links.other.nbytes
        + links.weight.nbytes
        + links.kind.nbytes
        + entity_units.nbytes
        + entities.of_fact.nbytes
        + term_units.nbytes
        + terms.of_fact.nbytes
        + dates.nbytes
        + temporal.nbytes
        + timeline.nbytes
        # names and ids of entities and terms, ~150 B each
        + 150 * (len(entity_rows) + len(term_rows))
    )
    return BankGraph(
        bank_id, read, facts, links, entities, terms, dates, temporal, nbytes, postings, timeline
    )


def _small(row: asyncpg.Record | None, column: str, size: int) -> NDArray[np.int8]:
    """A column of int2send codes as int8."""
    if row is None or not size:
        return np.zeros(0, dtype=np.int8)
    return np.frombuffer(row[column], dtype=">i2").astype(np.int8)


def _instants(row: asyncpg.Record | None, column: str, size: int) -> NDArray[np.int64]:
    """A column of timestamptz_send values: microseconds since 2000-01-01 UTC."""
    if row is None or not size:
        return np.zeros(0, dtype=np.int64)
    return np.frombuffer(row[column], dtype=">i8").astype(np.int64)
