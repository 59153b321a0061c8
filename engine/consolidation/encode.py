"""Embedding observation texts off the event loop, in the form memory_units stores."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from engine.embedding import Embedder
from engine.recall.vectors import encode_token_vectors


@dataclass(frozen=True)
class EncodedText:
    embedding: NDArray[np.float32]  # unit L2 norm
    token_vectors: bytes | None  # the reranker's token vectors (engine/recall/vectors.py)


TextEncoder = Callable[[Sequence[str]], Awaitable[list[EncodedText]]]


def text_encoder(embedder: Embedder, cpu: Executor) -> TextEncoder:
    """One model run per call gives the sentence vector and the token vectors."""

    async def encode(texts: Sequence[str]) -> list[EncodedText]:
        if not texts:
            return []
        loop = asyncio.get_running_loop()
        vectors, tokens = await loop.run_in_executor(cpu, embedder.embed_with_tokens, list(texts))
        return [
            EncodedText(np.asarray(v, dtype=np.float32), encode_token_vectors(t))
            for v, t in zip(vectors, tokens, strict=True)
        ]

    return encode
