"""The temporal arm over a bank held in memory (engine/recall/graph_cache.py): the exact
window's facts and the spread along temporal links, with no statement.

The same rows, order and scores as engine/recall/temporal.py's `exact_window_sql` and
`spread_sql`: a fact is inside [start, end) when its occurred range overlaps it, or, with no
occurred date, when it was mentioned inside it (the four branches of the statement are that
predicate split for the date indexes); in-window facts by cosine distance, ties by id (index
order); a spread fact scores its best seed's score × link weight, each seed reading its
first `fanout` temporal links (heaviest first, ties by id) before the request's filters, as
the statement's LIMIT does. Distances are pgvector's halfvec cosine recomputed in numpy
(graph_memory.py): they can differ in the 7th digit, which only reorders two facts exactly
as similar to the query.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from engine.recall.graph_memory import BankGraph, Dates, FactQuery, instant, visible_for
from engine.recall.types import ArmHit, FloatVector, RecallRequest, TimeWindow


def window_hits(
    graph: BankGraph,
    request: RecallRequest,
    vector: FloatVector,
    window: TimeWindow,
    limit: int,
    most: int | None = None,
) -> list[ArmHit] | None:
    """exact_window_sql over the cache: the `limit` visible in-window facts nearest the query;
    None, without ranking any, when the window holds more than `most` facts (visible or not:
    the cost is one distance per fact in it, ~1 µs at 384 dimensions)."""
    units = in_window(graph.dates, window)
    if most is not None and len(units) > most:
        return None
    query = FactQuery(graph, vector, visible_for(request))
    units = units[query.visible(units)]
    if not len(units):
        return []
    distances = query.distances(units)
    order = np.lexsort((units, distances))[:limit]
    ids = graph.facts.ids
    return [ArmHit(ids[units[k]], float(1 - distances[k])) for k in order.tolist()]


def in_window(dates: Dates, window: TimeWindow) -> NDArray[np.int32]:
    """The facts inside the window, visible or not, in index order."""
    start, end = instant(window.start), instant(window.end)
    occurred = dates.dated & (dates.start < end) & (dates.end >= start)
    mentioned = dates.mentioned & (dates.mentioned_at >= start) & (dates.mentioned_at < end)
    inside = occurred | (~dates.dated & mentioned)
    units: NDArray[np.int32] = np.flatnonzero(inside).astype(np.int32)
    return units


def spread_hits(
    graph: BankGraph,
    request: RecallRequest,
    vector: FloatVector,
    seeds: Sequence[tuple[str, float]],
    fanout: int,
) -> list[ArmHit]:
    """spread_sql over the cache: the facts temporally linked to `seeds` (id, score), each
    scored by its best seed's score × link weight (in no particular order)."""
    index, links = graph.facts.index, graph.temporal
    query = FactQuery(graph, vector, visible_for(request))
    best: dict[int, float] = {}
    for unit, score in seeds:
        i = index.get(unit)
        if i is None:  # written after the graph was read: the statement's race too
            continue
        start = int(links.starts[i])
        stop = min(int(links.starts[i + 1]), start + fanout)
        others = links.other[start:stop]
        kept = query.visible(others)
        for other, weight in zip(
            others[kept].tolist(), links.weight[start:stop][kept].tolist(), strict=True
        ):
            spread = score * weight
            if other not in best or spread > best[other]:
                best[other] = spread
    ids = graph.facts.ids
    return [ArmHit(ids[u], s) for u, s in best.items()]
