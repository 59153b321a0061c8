"""Query analysis, all of it CPU work the engine runs in the thread pool."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from engine.dates import parse_query_window
from engine.embedding import Embedder
from engine.recall.types import FloatMatrix, FloatVector, TimeWindow
from engine.text import tokenize


@dataclass(frozen=True)
class QueryText:
    terms: list[str]  # BM25 index terms, as retain tokenised facts
    window: TimeWindow | None  # the time the query speaks of, if any
    expression: str  # the words that named it ("last week")


@dataclass(frozen=True)
class QueryVectors:
    vector: FloatVector  # the pooled sentence embedding (unit norm)
    tokens: FloatMatrix  # per-token states for MaxSim (unit-norm rows)


def analyse_text(query: str, reference: datetime) -> QueryText:
    span = parse_query_window(query, reference)
    window = TimeWindow(span.start, span.end) if span is not None else None
    return QueryText(tokenize(query), window, span.expression if span is not None else "")


def embed_query(embedder: Embedder, query: str) -> QueryVectors:
    pooled, tokens = embedder.embed_with_tokens([query])
    return QueryVectors(pooled[0], tokens[0])
