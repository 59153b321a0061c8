"""Compact per-fact token vectors for the late-interaction (MaxSim) reranker.

Retain stores, with each fact, the MiniLM token states of its text (one model run gives them
together with the pooled sentence vector), so recall only does a small matrix product.

Format (`bytea`, since migration 0026): n rows of ⌈k/2⌉ bytes holding the model's last k
dimensions (`first_stored` on: 192-383 of 384), each byte two signed 4-bit codes c ∈ [−8, 7]
(high nibble first; an odd dimension count is padded with a 0 code), then n float16 row
scales s_j. Code c of row j decodes to 16 · s_j · (c + ½): sixteen levels symmetric about 0,
the value at the middle of its bin. s_j = max|row j| / 127 over the *whole* row, so a stored
row is exactly the last ⌈P/2⌉ bytes of the full-width int4 row of P = ⌈dim/2⌉ bytes
(migration 0014's format): migration 0026 converts stored blobs inside PostgreSQL with one
byte-aligned substring per token row, ~22 a fact, instead of work per nibble. The reranker
takes the query's tokens in the same dimensions and scales its products by dim / k
(`query_side`), so a product estimates the full inner product.

Why (measured, docs/benchmarks.md "Storage per fact"): at 100k facts the full-width blobs
(22 tokens a fact on average, 4.3 kB) were the largest thing stored, 5.2 kB a fact in TOAST;
half the dimensions fit most facts' blobs in one TOAST chunk instead of three (2.6 kB).
Which half: MaxSim alone ranking all raw turns of LoCoMo conversations 1-5 (760 questions of
categories 1-4, recall@10, int4 codes throughout, bench/token_vector_dims.py): every
dimension 0.702 · the second half 0.696 · the even ones 0.694 · a random orthogonal
projection to 192 0.690 · the first half 0.685 · the odd ones 0.684. The halves are
byte-aligned in the int4 format, even or odd dimensions are nibbles (a regular expression
per blob in SQL, ~12 ms a blob); a projection cannot be computed in a SQL migration.
Earlier: int4 rows have cosine 0.991 on average with the int8 rows they replaced (1st
percentile 0.983), about the int8 embedding model's own error (engine/quantise.py).
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


def first_stored(dim: int) -> int:
    """The first dimension kept per token row for a model of `dim`: the dimensions held by
    the last ⌈P/2⌉ of a full-width row's P = ⌈dim/2⌉ bytes are kept (192-383 of 384)."""
    packed = (dim + 1) // 2
    return 2 * (packed - (packed + 1) // 2)


def stored_dims(dim: int) -> int:
    """Dimensions kept per token row for a model of `dim`: from `first_stored` to the last."""
    return dim - first_stored(dim)


def row_bytes(dim: int) -> int:
    """Stored bytes per token row for a model of `dim`: the packed codes and the scale."""
    return (stored_dims(dim) + 1) // 2 + _SCALE_BYTES


def query_side(query_tokens: FloatMatrix) -> FloatMatrix:
    """The query's token rows in the stored dimensions, scaled so that a product with a
    decoded stored row estimates the full-width inner product."""
    dim = query_tokens.shape[1]
    kept: FloatMatrix = query_tokens[:, first_stored(dim) :] * np.float32(dim / stored_dims(dim))
    return kept


def encode_token_vectors(tokens: FloatMatrix) -> bytes:
    """Packed int4 rows of the stored dimensions (`first_stored` on) with a float16 scale
    each (taken over the whole row); an empty matrix encodes to b""."""
    matrix = np.asarray(tokens, dtype=np.float32)
    if matrix.ndim != 2 or matrix.shape[0] == 0:
        return b""
    scales = (np.maximum(np.abs(matrix).max(axis=1), _SCALE_FLOOR) / _INT8_MAX).astype(np.float16)
    steps = _STEP * scales.astype(np.float32)
    kept = matrix[:, first_stored(matrix.shape[1]) :]
    codes = np.clip(np.floor(kept / steps[:, None]), -8, 7).astype(np.int8)
    if codes.shape[1] % 2:
        codes = np.pad(codes, ((0, 0), (0, 1)))
    packed = (codes[:, 0::2] << 4) | (codes[:, 1::2] & 0x0F)
    blob: bytes = packed.astype(np.int8).tobytes() + scales.tobytes()
    return blob


def _pair_table() -> NDArray[np.complex128]:
    """Per little-endian 16-bit value, its two bytes' four decoded codes (c + ½, high nibble
    first, first byte first) as float32, each entry viewed as one 16-byte item so that one
    `np.take` decodes two bytes: 1 MB, built once per process."""
    codes = np.arange(256, dtype=np.uint8).view(np.int8)
    # Arithmetic shifts give the signed nibbles; int8 wraps the left shift.
    byte = np.stack([codes >> 4, (codes << 4) >> 4], axis=1).astype(np.float32) + 0.5
    value = np.arange(2**16, dtype=np.int64)
    pairs = np.ascontiguousarray(np.concatenate([byte[value & 0xFF], byte[value >> 8]], axis=1))
    table: NDArray[np.complex128] = pairs.view(np.complex128).reshape(-1)
    table.flags.writeable = False
    return table


_PAIRS = _pair_table()


def _counts(blobs: Sequence[bytes], dim: int) -> list[int]:
    width = row_bytes(dim)
    counts: list[int] = []
    for blob in blobs:
        if len(blob) % width:
            raise ValueError(f"token vector blob of {len(blob)} bytes is not n x {width}")
        counts.append(len(blob) // width)
    return counts


def decode_token_vectors(blob: bytes, dim: int) -> FloatMatrix:
    """The (n, stored_dims) float32 matrix of the dimensions `encode_token_vectors` stored
    for a model of `dim`; (0, stored_dims) for b""."""
    rows, scales, _ = decode_many([blob], dim)
    decoded: FloatMatrix = rows * scales[:, None]
    return decoded


def decode_many(
    blobs: Sequence[bytes], dim: int
) -> tuple[FloatMatrix, NDArray[np.float32], list[int]]:
    """Several blobs of a model of `dim` as one (Σn, stored_dims) matrix of the codes (c + ½,
    as float32, not yet scaled), the Σn row scales (16 · s_j), and each blob's row count:
    row j decodes to `scales[j] * rows[j]`.

    A caller taking dot products scales the (far smaller) product instead of the rows, and
    joining the blobs first makes the conversion one vectorised step. Measured for MaxSim over
    400 blobs of 21 tokens and a 12-token query (int8 format): 4.7 ms of CPU instead of
    14.7 ms for scaling the rows first.
    """
    counts = _counts(blobs, dim)
    kept = stored_dims(dim)
    packed = (kept + 1) // 2
    body = b"".join(blob[: n * packed] for blob, n in zip(blobs, counts, strict=True))
    scale_bytes = b"".join(blob[n * packed :] for blob, n in zip(blobs, counts, strict=True))
    size = len(body)
    # Two bytes at a time through a table of their four decoded values (_PAIRS): 13,600 rows
    # (a recall at 100k facts) in 1.7-1.9 ms instead of 2.7-3.1 for two shifts, a conversion
    # and the ½ over the codes, the same values (docs/benchmarks.md "The server's share,
    # second pass"); an odd count of bytes is padded with one and the padding dropped.
    codes = np.frombuffer(body + b"\0" * (size % 2), dtype="<u2")
    values = np.take(_PAIRS, codes).view(np.float32)[: 2 * size]
    rows: FloatMatrix = values.reshape(-1, 2 * packed)[:, :kept]
    scales = np.frombuffer(scale_bytes, dtype=np.float16).astype(np.float32) * _STEP
    return rows, scales, counts
