"""Compact per-fact token vectors for the late-interaction (MaxSim) reranker.

Retain stores, with each fact, the MiniLM token states of its text (one model run gives them
together with the pooled sentence vector), so recall only does a small matrix product.

Format (`bytea`, since migration 0014): n rows of ⌈dim/2⌉ bytes, each byte two signed 4-bit
codes c ∈ [−8, 7] (high nibble first; an odd last dimension is padded with 0), then n
float16 row scales s_j. Code c of row j decodes to 16 · s_j · (c + ½): sixteen levels
symmetric about 0, the value at the middle of its bin. s_j = max|row j| / 127, the scale of
the int8 format this one replaced, so an int8 code v becomes the int4 code v >> 4 (its high
nibble) with the scale kept: migration 0014 converts stored blobs inside PostgreSQL that way.

Why int4 (measured): per fact the int8 blobs were ~8.2 kB of the database's ~22 kB (bench
recall_latency's bank, 21 tokens per fact); int4 halves them. On that bank's stored token
vectors (500 facts, 10,500 rows) int4 rows have cosine 0.991 on average with the int8 rows
(1st percentile 0.983), about the int8 embedding model's own error (engine/quantise.py).
Earlier, on LoCoMo conversations 1-5 (raw turns, MaxSim reranking the BM25 + dense top 50,
recall@10): float32 0.704 · float16 0.704 · int8 0.703 · random projection to 192 dims
0.699, to 128 (int8) 0.689, to 64 0.673. The LoCoMo figure with int4 is in
docs/benchmarks.md ("Storage per fact").
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

FloatMatrix = NDArray[np.float32]

_SCALE_BYTES = 2  # one float16 per row
_INT8_MAX = 127.0
_SCALE_FLOOR = 1e-12
_STEP = 16.0  # int4 bin width in units of the row scale


def row_bytes(dim: int) -> int:
    """Stored bytes per token row: the packed codes and the scale."""
    return (dim + 1) // 2 + _SCALE_BYTES


def encode_token_vectors(tokens: FloatMatrix) -> bytes:
    """Packed int4 rows with a float16 scale each; an empty matrix encodes to b""."""
    matrix = np.asarray(tokens, dtype=np.float32)
    if matrix.ndim != 2 or matrix.shape[0] == 0:
        return b""
    scales = (np.maximum(np.abs(matrix).max(axis=1), _SCALE_FLOOR) / _INT8_MAX).astype(np.float16)
    steps = _STEP * scales.astype(np.float32)
    codes = np.clip(np.floor(matrix / steps[:, None]), -8, 7).astype(np.int8)
    if codes.shape[1] % 2:
        codes = np.pad(codes, ((0, 0), (0, 1)))
    packed = (codes[:, 0::2] << 4) | (codes[:, 1::2] & 0x0F)
    blob: bytes = packed.astype(np.int8).tobytes() + scales.tobytes()
    return blob


def _counts(blobs: Sequence[bytes], dim: int) -> list[int]:
    width = row_bytes(dim)
    counts: list[int] = []
    for blob in blobs:
        if len(blob) % width:
            raise ValueError(f"token vector blob of {len(blob)} bytes is not n x {width}")
        counts.append(len(blob) // width)
    return counts


def decode_token_vectors(blob: bytes, dim: int) -> FloatMatrix:
    """The (n, dim) float32 matrix `encode_token_vectors` stored; (0, dim) for b""."""
    rows, scales, _ = decode_many([blob], dim)
    decoded: FloatMatrix = rows * scales[:, None]
    return decoded


def decode_many(
    blobs: Sequence[bytes], dim: int
) -> tuple[FloatMatrix, NDArray[np.float32], list[int]]:
    """Several blobs as one (Σn, dim) matrix of the codes (c + ½, as float32, not yet
    scaled), the Σn row scales (16 · s_j), and each blob's row count: row j decodes to
    `scales[j] * rows[j]`.

    A caller taking dot products scales the (far smaller) product instead of the rows, and
    joining the blobs first makes the conversion one vectorised step. Measured for MaxSim over
    400 blobs of 21 tokens and a 12-token query (int8 format): 4.7 ms of CPU instead of
    14.7 ms for scaling the rows first.
    """
    counts = _counts(blobs, dim)
    packed = (dim + 1) // 2
    body = b"".join(blob[: n * packed] for blob, n in zip(blobs, counts, strict=True))
    scale_bytes = b"".join(blob[n * packed :] for blob, n in zip(blobs, counts, strict=True))
    codes = np.frombuffer(body, dtype=np.int8)
    # Arithmetic shifts give the signed nibbles; 8,400 rows take ~3 ms (a table lookup per
    # byte took 135 ms; the int8 format's conversion 0.8 ms).
    pairs = np.empty((codes.size, 2), dtype=np.float32)
    pairs[:, 0] = codes >> 4
    pairs[:, 1] = (codes << 4) >> 4
    pairs += 0.5
    rows: FloatMatrix = pairs.reshape(-1, 2 * packed)[:, :dim]
    scales = np.frombuffer(scale_bytes, dtype=np.float16).astype(np.float32) * _STEP
    return rows, scales, counts
