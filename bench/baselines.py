"""In-process baselines over the same turns as the system under test: one document per turn.

* BM25 with `engine.text.tokenize` (stemmed, stop words dropped) and `engine.bm25`'s formula,
  scored from an inverted index rather than document by document.
* The same with the session date written before each turn, the tuning the keyword arm uses.
* Dense: MiniLM (`engine.embedding`) sentence vectors, cosine top-k by one matrix product.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from engine.bm25 import BM25Params, idf, saturated_tf
from engine.embedding import Embedder
from engine.text import tokenize


@dataclass(frozen=True)
class Posting:
    doc: int
    tf: int


class BM25Index:
    """Okapi BM25 over a fixed list of documents; ranks are document indexes."""

    def __init__(
        self,
        documents: Sequence[str],
        params: BM25Params,
        tokenizer: Callable[[str], list[str]] = tokenize,
    ) -> None:
        self._params = params
        self._tokenize = tokenizer
        self._lengths: list[int] = []
        self._postings: dict[str, list[Posting]] = {}
        for doc, text in enumerate(documents):
            terms = tokenizer(text)
            self._lengths.append(len(terms))
            for term, tf in Counter(terms).items():
                self._postings.setdefault(term, []).append(Posting(doc, tf))
        self._n_docs = len(documents)
        self._avg_len = sum(self._lengths) / self._n_docs if self._n_docs else 0.0

    def search(self, query: str, limit: int) -> list[int]:
        """Best `limit` documents with a positive score; ties broken by document order."""
        scores: dict[int, float] = {}
        for term in dict.fromkeys(self._tokenize(query)):
            postings = self._postings.get(term)
            if not postings:
                continue
            weight = idf(self._n_docs, len(postings))
            for p in postings:
                tf_part = saturated_tf(p.tf, self._lengths[p.doc], self._avg_len, self._params)
                scores[p.doc] = scores.get(p.doc, 0.0) + weight * tf_part
        ranked = sorted(scores.items(), key=lambda item: (-item[1], item[0]))
        return [doc for doc, _ in ranked[:limit]]


class DenseIndex:
    """Cosine similarity over unit-norm sentence vectors (a dot product)."""

    def __init__(self, embedder: Embedder, documents: Sequence[str]) -> None:
        self._embedder = embedder
        self._matrix = embedder.embed(list(documents))

    def search_many(self, queries: Sequence[str], limit: int) -> list[list[int]]:
        if not queries:
            return []
        similarities = self._embedder.embed(list(queries)) @ self._matrix.T
        # Stable sort on the negated scores: ties keep document order, as in BM25Index.
        order = np.argsort(-similarities, axis=1, kind="stable")[:, :limit]
        return [[int(doc) for doc in row] for row in order]
