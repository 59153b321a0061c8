"""The million-fact bench's vectors (bench/recall_million.py): a pool of facts embedded for
real once, and every fact taking the vectors of the pool entry its text hashes to, the
sentence vector perturbed by Gaussian noise (σ = NOISE per dimension) and normalised again."""

from __future__ import annotations

import time
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import numpy as np
from numpy.typing import NDArray

from bench.bulk_load import PoolVectors
from engine.embedding import Embedder

FloatMatrix = NDArray[np.float32]

NOISE: Final = 0.02


class PooledEmbedder:
    """An Embedder whose vectors are a real pool's, perturbed per text (module docstring)."""

    def __init__(self, real: Embedder, vectors: FloatMatrix, tokens: list[FloatMatrix]) -> None:
        self._real = real
        self._vectors = vectors
        self._tokens = tokens

    @property
    def name(self) -> str:
        return self._real.name

    @property
    def dimension(self) -> int:
        return int(self._vectors.shape[1])

    @property
    def space(self) -> str:
        return self._real.space

    def pick(self, text: str) -> tuple[int, FloatMatrix]:
        """The pool entry a text takes, and its sentence vector."""
        key = zlib.crc32(text.encode())
        index = key % len(self._vectors)
        noise = np.random.default_rng(key).normal(0, NOISE, self.dimension).astype(np.float32)
        vector = self._vectors[index] + noise
        return index, vector / np.linalg.norm(vector)

    def _pick(self, text: str) -> tuple[FloatMatrix, FloatMatrix]:
        index, vector = self.pick(text)
        return vector, self._tokens[index]

    def for_loader(self) -> PoolVectors:
        return PoolVectors(self._vectors, self._tokens, self.pick)

    def embed(self, texts: Sequence[str]) -> FloatMatrix:
        return self.embed_with_tokens(texts)[0]

    def embed_tokens(self, texts: Sequence[str]) -> list[FloatMatrix]:
        return self.embed_with_tokens(texts)[1]

    def embed_with_tokens(self, texts: Sequence[str]) -> tuple[FloatMatrix, list[FloatMatrix]]:
        picked = [self._pick(t) for t in texts]
        return np.stack([v for v, _ in picked]).astype(np.float32), [t for _, t in picked]

    def known_tokens(self, text: str) -> list[bool]:
        return self._real.known_tokens(text)


def load_pool(real: Embedder, texts: list[str], path: Path) -> PooledEmbedder:
    """The pool's real vectors, embedded once and kept in `path`."""
    if path.is_file():
        data = np.load(path)
        vectors, flat, counts = data["vectors"], data["tokens"], data["counts"]
    else:
        started = time.perf_counter()
        vectors, matrices = real.embed_with_tokens(texts)
        counts = np.array([m.shape[0] for m in matrices])
        flat = np.concatenate(matrices)
        np.savez(path, vectors=vectors, tokens=flat, counts=counts)
        print(f"embedded a pool of {len(texts):,} facts in {time.perf_counter() - started:.0f}s")
    offsets = np.concatenate(([0], np.cumsum(counts)))
    tokens = [flat[offsets[i] : offsets[i + 1]] for i in range(len(counts))]
    return PooledEmbedder(real, np.asarray(vectors, dtype=np.float32), tokens)
