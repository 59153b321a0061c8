"""Keyword arm from memory: exact BM25 over a cached bank's postings, no statement.

When the bank's graph is cached (engine/recall/graph_cache.py), its postings were read in the
same REPEATABLE READ snapshot and are checked by the same `bank_changes` probe on every recall,
so they are exactly what the SQL arm (engine/recall/keyword.py) would read. Held per term: the
facts containing it (their index in the cached bank, ascending) with its tf, and its df; per
fact its token_count; per bank N and avgdl. The score is keyword.py's formula (engine.bm25),
summed over EVERY posting of the query's terms: no screen, so nothing is missed above
EXACT_POSTINGS. Filters are graph_memory's (types, tags in every mode, states incl. as_of).
Ties go by fact id, as the statement's `ORDER BY score DESC, m.id` (facts are numbered in id
order). Scores equal the statement's to float tolerance: the sums run in another order.

The postings and their memory cost: engine/recall/postings.py.
"""

from __future__ import annotations

import time

import numpy as np
from numpy.typing import NDArray

from engine.bm25 import BM25Params
from engine.recall.graph_memory import STATES, BankGraph, tags_pass, visible_for
from engine.recall.types import FACT_TYPES, ArmHit, ArmResult, RecallRequest


def memory_keyword_arm(
    graph: BankGraph, request: RecallRequest, terms: list[str], limit: int, params: BM25Params
) -> ArmResult:
    """keyword.py's `keyword_arm` over the cached postings, exact at every size (CPU)."""
    started = time.perf_counter()
    postings, facts = graph.postings, graph.facts
    distinct = list(dict.fromkeys(terms))
    if not distinct:
        return ArmResult("keyword", [], 0.0, "no index terms in the query")
    rows = [postings.index[t] for t in distinct if t in postings.index]
    n = postings.unit_count
    if not rows or n is None:
        return _result([], started, 0)
    k1, b = params.k1, params.b
    parts_units: list[NDArray[np.int32]] = []
    parts_scores: list[NDArray[np.float64]] = []
    for r in rows:
        units = postings.units[postings.starts[r] : postings.starts[r + 1]]
        tf = postings.tf[postings.starts[r] : postings.starts[r + 1]].astype(np.float64)
        df = float(postings.df[r])
        idf = np.log(1.0 + (n - df + 0.5) / (df + 0.5))
        relative = (
            postings.lengths[units] / postings.avgdl
            if postings.avgdl > 0
            else np.ones(len(units), dtype=np.float64)
        )
        parts_units.append(units)
        parts_scores.append(idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * relative)))
    every = np.concatenate(parts_units)
    size = len(facts.ids)
    matched = np.flatnonzero(np.bincount(every, minlength=size))
    scores = np.bincount(every, weights=np.concatenate(parts_scores), minlength=size)[matched]
    visible = visible_for(request)
    type_ok = np.isin(np.arange(len(FACT_TYPES)), sorted(visible.types))
    state_ok = np.isin(np.arange(len(STATES)), sorted(visible.states))
    keep = type_ok[facts.types[matched]] & state_ok[facts.states[matched]]
    matched, scores = matched[keep], scores[keep]
    if visible.tags:
        # Tags last, in rank order, until `limit` pass (a Python check per fact).
        order = np.lexsort((matched, -scores))
        chosen: list[int] = []
        for k in order.tolist():
            tags = facts.tags.get(int(matched[k]), frozenset())
            if tags_pass(tags, visible.tags, visible.tags_match):
                chosen.append(k)
                if len(chosen) >= limit:
                    break
        top = np.asarray(chosen, dtype=np.int64)
    else:
        if len(scores) > limit > 0:
            # Every fact scoring at least the limit-th best, so ties break by id as in SQL.
            bound = np.partition(scores, len(scores) - limit)[len(scores) - limit]
            near = np.flatnonzero(scores >= bound)
        else:
            near = np.arange(len(scores))
        top = near[np.lexsort((matched[near], -scores[near]))][: max(limit, 0)]
    hits = [
        ArmHit(facts.ids[u], s)
        for u, s in zip(matched[top].tolist(), scores[top].tolist(), strict=True)
    ]
    return _result(hits, started, len(every))


def _result(hits: list[ArmHit], started: float, read: int) -> ArmResult:
    note = f"from memory: all {read} postings scored"
    return ArmResult("keyword", hits, (time.perf_counter() - started) * 1000, note)
