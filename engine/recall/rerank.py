"""The rerank stage, pluggable: MaxSim late interaction (default), an ONNX cross-encoder, or
none. Rerankers are synchronous CPU work; the engine runs them in the thread pool.

MaxSim (ColBERT's late interaction, zero-shot over MiniLM's token states):
    maxsim(q, d) = (1 / |q|) · Σ_i max_j ⟨q_i, d_j⟩
over the query's and the fact's unit-norm token vectors. The fact's side was computed at
retain time and stored compactly (engine/recall/vectors.py), so a query costs one model run
(shared with its sentence embedding) and one (|q| × Σ|d|) matrix product over the stored
int4 values (half the dimensions), scaled afterwards: at 100k facts, 80 candidates and
their neighbours are ~400 blobs and ~8,400 tokens, 4.7 ms of CPU with the conversion
(engine/recall/vectors.py, measured at full width).
Measured on LoCoMo (conversations 1-5, recall@10): over raw turns, the union of the BM25 and
dense top 50 in BM25 order 0.636, in MaxSim order 0.704; over extracted facts, the fused top
80 in fused order 0.645, in MaxSim order 0.681 (engine/recall/config.py has the rest).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import onnxruntime as ort
from numpy.typing import NDArray
from tokenizers import Tokenizer

from engine.errors import ConfigurationError
from engine.recall.types import CandidateRow, FloatMatrix
from engine.recall.vectors import decode_many, query_side

MAXSIM = "maxsim"
NONE = "none"
ONNX_PREFIX = "onnx:"
KNOWN = (MAXSIM, NONE, "onnx:<model.onnx>:<tokenizer.json>")

CROSS_ENCODER_MAX_TOKENS = 512
CROSS_ENCODER_BATCH = 16


class Reranker(Protocol):
    @property
    def name(self) -> str: ...

    def score(
        self, query: str, query_tokens: FloatMatrix, rows: Sequence[CandidateRow]
    ) -> list[float]:
        """One relevance score per row, higher is better (any scale)."""
        ...


class MaxSimReranker:
    """Late interaction over the token vectors stored with each fact, blended with the same
    score over the fact *in its context* (its tokens plus those of the facts told just before
    and after it in its conversation, engine/recall/context.py):
        score(d) = (1 − ρ) · maxsim(q, d) + ρ · maxsim(q, d ∪ neighbours(d))
    A fact extracted from a conversation often says "They love learning about animals": its
    neighbours say who "they" are. Measured (LoCoMo conv 1-5, recall@10, the rest of the
    pipeline at its defaults): ρ = 0 0.730 · ρ = 0.2 0.743 · ρ = 0.3 0.747 · ρ = 0.5 0.744 ·
    ρ = 1 (the context alone) lower again; neighbours found only among the candidates
    (no extra read) gave 0.736.

    A fact stored before token vectors existed is scored with its sentence vector standing in
    for all of its tokens.
    """

    name = MAXSIM

    def __init__(self, dimension: int, context_weight: float = 0.0) -> None:
        self._dimension = dimension
        self._context_weight = context_weight

    @property
    def wants_context(self) -> bool:
        return self._context_weight > 0

    def score(
        self, query: str, query_tokens: FloatMatrix, rows: Sequence[CandidateRow]
    ) -> list[float]:
        if not rows:
            return []
        if query_tokens.shape[0] == 0:
            return [0.0] * len(rows)
        # max over a union of token sets = elementwise max of each set's maxima, so each
        # distinct stored matrix is decoded and multiplied once, however many candidates have
        # it in their context (neighbours share a chunk, and candidates are neighbours).
        slot: dict[int, int] = {}
        blobs: list[bytes] = []
        own: list[int] = []
        members: list[int] = []  # per row with tokens: its own slot, then its context's
        ends: list[int] = []
        for row in rows:
            if not row.token_vectors:
                own.append(-1)
                continue
            for blob in (row.token_vectors, *row.context_vectors):
                at = slot.setdefault(id(blob), len(blobs))
                if at == len(blobs):
                    blobs.append(blob)
                members.append(at)
            own.append(members[len(members) - 1 - len(row.context_vectors)])
            ends.append(len(members))
        # The query's width, not the one this reranker was built with: after a
        # re-embedding (engine/reembed.py) the model, and with it the width, changes.
        tokens, scales, counts = decode_many(blobs, query_tokens.shape[1])
        # Stored rows keep half the dimensions: the query's rows in the same ones.
        best = _best_per_blob(query_side(query_tokens), tokens, scales, counts)  # (|q|, blobs)
        has = np.asarray(own) >= 0
        own_best = np.empty((query_tokens.shape[0], len(rows)), dtype=np.float32)
        own_best[:, has] = best[:, [i for i in own if i >= 0]]
        if not has.all():
            # A fact stored before token vectors existed: its sentence vector stands in.
            fallback = np.stack([row.embedding for row in rows]) @ query_tokens.T  # (rows, |q|)
            own_best[:, ~has] = fallback[~has].T
        scores = own_best.mean(axis=0)
        rho = self._context_weight
        if rho > 0:
            in_context = own_best.copy()
            if members:
                # Each row's members are contiguous in `members`: one max per row.
                starts = [0, *ends[:-1]]
                in_context[:, has] = np.maximum.reduceat(best[:, members], starts, axis=1)
            scores = (1 - rho) * scores + rho * in_context.mean(axis=0)
        return [float(v) for v in scores]


def _best_per_blob(
    query_tokens: FloatMatrix,
    tokens: FloatMatrix,
    scales: NDArray[np.float32],
    counts: Sequence[int],
) -> NDArray[np.float32]:
    """max over each blob's rows of <q_i, scale_j · d_j>, for every query token i: one matrix
    product, scaled per column. An empty blob (a fact with no tokens) scores 0."""
    best = np.zeros((query_tokens.shape[0], len(counts)), dtype=np.float32)
    nonempty = [i for i, n in enumerate(counts) if n > 0]
    if nonempty:
        offsets = np.concatenate(([0], np.cumsum(counts)[:-1]))[nonempty]
        # (Σ|d|, |q|): a tall matrix times a small one is the faster product here (OpenBLAS,
        # 14k token rows x 192 x 12: 1.7-2.1 ms instead of 3.0-3.4), the same values.
        similarity = tokens @ query_tokens.T
        similarity *= scales[:, None]
        best[:, nonempty] = np.maximum.reduceat(similarity, offsets, axis=0).T
    return best


class CrossEncoderReranker:
    """A cross-encoder exported to ONNX (e.g. an ms-marco MiniLM), supplied by the user:
    `ENGRAM_RERANKER=onnx:/models/ce.onnx:/models/tokenizer.json`. The graph takes
    `input_ids`, `attention_mask` (and optionally `token_type_ids`) for (query, fact) pairs and
    returns logits of shape (batch,), (batch, 1) or (batch, classes), the last column being
    relevance."""

    def __init__(self, session: Any, tokenizer: Tokenizer, name: str) -> None:
        self.name = name
        self._session = session
        self._tokenizer = tokenizer
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(CROSS_ENCODER_MAX_TOKENS)
        self._inputs = {i.name: i.type for i in session.get_inputs()}
        if "input_ids" not in self._inputs:
            raise ConfigurationError(f"reranker {name!r}: the graph has no input_ids input")

    @classmethod
    def from_paths(cls, model: Path, tokenizer: Path, name: str) -> CrossEncoderReranker:
        if not model.is_file():
            raise ConfigurationError(f"reranker {name!r}: no ONNX file at {model}")
        if not tokenizer.is_file():
            raise ConfigurationError(f"reranker {name!r}: no tokenizer at {tokenizer}")
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1  # concurrency comes from the thread pool
        options.inter_op_num_threads = 1
        session = ort.InferenceSession(
            str(model), sess_options=options, providers=["CPUExecutionProvider"]
        )
        return cls(session, Tokenizer.from_file(str(tokenizer)), name)

    def score(
        self, query: str, query_tokens: FloatMatrix, rows: Sequence[CandidateRow]
    ) -> list[float]:
        scores: list[float] = []
        for start in range(0, len(rows), CROSS_ENCODER_BATCH):
            batch = rows[start : start + CROSS_ENCODER_BATCH]
            scores += self._score_batch(query, [row.text for row in batch])
        return scores

    def _score_batch(self, query: str, texts: list[str]) -> list[float]:
        encodings = self._tokenizer.encode_batch([(query, text) for text in texts])
        width = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(encodings), width), dtype=np.int64)
        mask = np.zeros((len(encodings), width), dtype=np.int64)
        types = np.zeros((len(encodings), width), dtype=np.int64)
        for row, encoding in enumerate(encodings):
            n = len(encoding.ids)
            ids[row, :n] = encoding.ids
            mask[row, :n] = 1
            types[row, :n] = encoding.type_ids
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        feed = {
            name: feeds[name].astype(np.int32) if kind == "tensor(int32)" else feeds[name]
            for name, kind in self._inputs.items()
            if name in feeds
        }
        logits = np.asarray(self._session.run(None, feed)[0], dtype=np.float32)
        if logits.ndim == 2:
            logits = logits[:, -1]
        if logits.shape != (len(texts),):
            raise ConfigurationError(
                f"reranker {self.name!r} returned logits of shape {logits.shape}"
            )
        return [float(v) for v in logits]


def load_reranker(spec: str, dimension: int, context_weight: float = 0.0) -> Reranker | None:
    """The reranker a setting names; None for `none`."""
    if spec == MAXSIM:
        return MaxSimReranker(dimension, context_weight)
    if spec == NONE:
        return None
    if spec.startswith(ONNX_PREFIX):
        parts = spec[len(ONNX_PREFIX) :].rsplit(":", 1)
        if len(parts) == 2 and all(parts):
            return CrossEncoderReranker.from_paths(Path(parts[0]), Path(parts[1]), spec)
    raise ConfigurationError(f"unknown reranker {spec!r}; known: {', '.join(KNOWN)}")
