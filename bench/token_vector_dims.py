"""Which dimensions of the stored token vectors MaxSim needs: LoCoMo recall@10 with MaxSim
alone ranking every raw turn of a conversation (no other arm, no fusion), for the int4 codes
of all dimensions, the first half (what engine/recall/vectors.py stores since migration
0027), the second half, the even ones, the odd ones, and a random orthogonal projection to
half the width (for comparison; a SQL migration could not compute it).

    .venv/bin/python -m bench.token_vector_dims --conversations 1-5
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from bench.locomo_data import DEFAULT_DATA, load_locomo, parse_selection
from engine.embedding import load_embedder
from engine.recall.vectors import encode_token_vectors

FloatMatrix = NDArray[np.float32]


def full_width(tokens: FloatMatrix) -> FloatMatrix:
    """The int4 values of every dimension, as the format before migration 0027 kept them."""
    scales = (np.maximum(np.abs(tokens).max(axis=1), 1e-12) / 127.0).astype(np.float16)
    steps = 16.0 * scales.astype(np.float32)
    codes = np.clip(np.floor(tokens / steps[:, None]), -8, 7)
    values: FloatMatrix = ((codes + 0.5) * steps[:, None]).astype(np.float32)
    return values


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--conversations", default="1-5")
    args = parser.parse_args()
    data = load_locomo(args.data)
    embedder = load_embedder("minilm")
    dim = embedder.dimension
    rng = np.random.default_rng(0)
    projection = np.linalg.qr(rng.standard_normal((dim, dim)))[0][:, : dim // 2]
    projection = projection.astype(np.float32)
    half = dim // 2
    names = ("all", "first", "second", "even", "odd", "random")
    recalls: dict[str, list[float]] = {name: [] for name in names}
    started = time.perf_counter()
    chosen = set(parse_selection(args.conversations, len(data.conversations)))
    for conversation in data.conversations:
        if conversation.number not in chosen:
            continue
        turns = conversation.turns
        tokens = embedder.embed_tokens([t.content for t in turns])
        counts = [t.shape[0] for t in tokens]
        offsets = np.concatenate(([0], np.cumsum(counts)[:-1]))
        stored = np.concatenate([full_width(t) for t in tokens])
        projected = np.concatenate([full_width(t @ projection) for t in tokens])
        assert len(encode_token_vectors(tokens[0])) > 0
        questions = [q for q in conversation.questions if q.category in (1, 2, 3, 4)]
        query_tokens = embedder.embed_tokens([q.question for q in questions])
        ids = [t.dia_id for t in turns]
        for question, q in zip(questions, query_tokens, strict=True):
            similarities = {
                "all": q @ stored.T,
                "first": q[:, :half] @ stored[:, :half].T,
                "second": q[:, half:] @ stored[:, half:].T,
                "even": q[:, ::2] @ stored[:, ::2].T,
                "odd": q[:, 1::2] @ stored[:, 1::2].T,
                "random": (q @ projection) @ projected.T,
            }
            for name, similarity in similarities.items():
                scores = np.maximum.reduceat(similarity, offsets, axis=1).mean(axis=0)
                top = {ids[i] for i in np.argsort(-scores, kind="stable")[:10]}
                recalls[name].append(len(question.evidence & top) / len(question.evidence))
    for name, values in recalls.items():
        print(f"{name:>6}  recall@10 {np.mean(values):.4f}  ({len(values)} questions)")
    print(f"{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
