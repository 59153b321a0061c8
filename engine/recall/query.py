"""Query analysis, all of it CPU work the engine runs in the thread pool."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import numpy as np

from engine.dates import parse_query_window
from engine.dates.questions import asks_time
from engine.embedding import Embedder
from engine.recall.names import name_keys
from engine.recall.types import FloatMatrix, FloatVector, TimeWindow
from engine.text import tokenize


@dataclass(frozen=True)
class QueryText:
    terms: list[str]  # BM25 index terms, as retain tokenised facts
    window: TimeWindow | None  # the time the query speaks of, if any
    expression: str  # the words that named it ("last week")
    asks_time: bool = False  # "什么时候 ...?": dated facts answer it (engine/dates/questions.py)
    # The entity names it may speak of (engine/recall/names.py), for the graph arm: found
    # here, in the same turn of the thread pool as the rest, not in a turn of their own.
    names: tuple[str, ...] = ()


@dataclass(frozen=True)
class QueryVectors:
    vector: FloatVector  # the pooled sentence embedding (unit norm)
    tokens: FloatMatrix  # per-token states for MaxSim (unit-norm rows), known tokens only
    known_share: float  # share of the query's tokens the model knows (1.0 for English)


def analyse_text(query: str, reference: datetime) -> QueryText:
    span = parse_query_window(query, reference)
    window = TimeWindow(span.start, span.end) if span is not None else None
    expression = span.expression if span is not None else ""
    return QueryText(tokenize(query), window, expression, asks_time(query), tuple(name_keys(query)))


def embed_query(embedder: Embedder, query: str) -> QueryVectors:
    """The query's vectors. Tokens the model does not know ([UNK]: most Chinese characters
    under MiniLM) are left out of MaxSim: every [UNK] looks like every other, so they would
    favour facts by how much unknown text they hold, not by what they say."""
    pooled, tokens = embedder.embed_with_tokens([query])
    known = embedder.known_tokens(query)
    matrix = tokens[0]
    if len(known) == len(matrix) and any(known) and not all(known):
        matrix = matrix[np.array(known)]
    share = sum(known) / len(known) if known else 1.0
    return QueryVectors(pooled[0], matrix, share)
