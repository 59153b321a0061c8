"""A candidate semantic arm for Chinese: a Model2Vec-format static embedding (a directory with
`tokenizer.json`, `model.safetensors` and `config.json`, as a registry package ships it),
ranked as a dense baseline beside MiniLM on the Chinese set (bench/zh_data.py) and on LoCoMo.

Static embeddings are a token table: a text's vector is the mean of its tokens' rows (with
"vocabulary quantisation", token -> cluster row via `mapping`, times a per-token `weights`
scale), normalised. Nothing here is wired into Engram; it measures whether a candidate is
worth wiring.

    .venv/bin/python -m bench.static_embedding /path/to/static_model/model --conversations 1-3
"""

from __future__ import annotations

import argparse
import json
import struct
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from numpy.typing import NDArray
from tokenizers import Tokenizer

from bench.locomo_data import Conversation, load_locomo, parse_selection
from bench.locomo_rankings import QuestionOutcome, record, score_all
from bench.retrieval_metrics import headline_table
from bench.zh_data import conversation as zh_conversation
from engine.embedding import MiniLMEmbedder

LOCOMO = Path("/work/shared/data/locomo/locomo10.json")


class StaticEmbedder:
    """Mean of token rows, normalised: what Model2Vec's `encode` computes."""

    def __init__(self, directory: Path) -> None:
        raw = (directory / "model.safetensors").read_bytes()
        header_len = struct.unpack("<Q", raw[:8])[0]
        header = json.loads(raw[8 : 8 + header_len])
        tensors: dict[str, NDArray[np.float32]] = {}
        for name, meta in header.items():
            if name == "__metadata__":
                continue
            start, end = meta["data_offsets"]
            dtype = {"F32": np.float32, "I64": np.int64, "I8": np.int8, "F16": np.float16}
            data = np.frombuffer(
                raw[8 + header_len + start : 8 + header_len + end], dtype[meta["dtype"]]
            )
            tensors[name] = data.reshape(meta["shape"])
        self._table = tensors["embeddings"].astype(np.float32)
        count = self._table.shape[0]
        self._mapping = tensors.get("mapping", np.arange(count)).astype(np.int64)
        self._weights = tensors.get("weights", np.ones(len(self._mapping))).astype(np.float32)
        self._tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
        self.dimension = int(self._table.shape[1])

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        rows = []
        for encoding in self._tokenizer.encode_batch(list(texts), add_special_tokens=False):
            ids = np.asarray(encoding.ids, dtype=np.int64)
            vector = (
                (self._table[self._mapping[ids]] * self._weights[ids][:, None]).mean(axis=0)
                if len(ids)
                else np.zeros(self.dimension, np.float32)
            )
            rows.append(vector / (np.linalg.norm(vector) or 1.0))
        return np.vstack(rows).astype(np.float32)


def _rank(embed: StaticEmbedder | MiniLMEmbedder, conv: Conversation) -> list[list[int]]:
    turns = embed.embed([t.content for t in conv.turns])
    questions = embed.embed([q.question for q in conv.questions])
    return [list(np.argsort(-(turns @ q), kind="stable")[:50]) for q in questions]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("model", type=Path, help="directory of the static model")
    parser.add_argument("--conversations", default="1-3", help="LoCoMo conversations")
    parser.add_argument("--locomo", type=Path, default=LOCOMO)
    args = parser.parse_args(argv)
    static = StaticEmbedder(args.model)
    minilm = MiniLMEmbedder(intra_op_threads=1)
    data = load_locomo(args.locomo)
    chosen = [
        data.conversations[i] for i in parse_selection(args.conversations, len(data.conversations))
    ]
    for label, convs in (
        ("Chinese set", [zh_conversation()]),
        (f"LoCoMo {args.conversations}", chosen),
    ):
        outcomes = {
            (c.sample_id, i): QuestionOutcome(
                c.sample_id, q.category, q.question, sorted(q.evidence)
            )
            for c in convs
            for i, q in enumerate(c.questions)
        }
        for conv in convs:
            record(outcomes, conv, "static", _rank(static, conv))
            record(outcomes, conv, "dense minilm", _rank(minilm, conv))
        print(f"\n{label}\n{headline_table(score_all(outcomes, ['static', 'dense minilm']))}")
    texts = [t.content for t in chosen[0].turns]
    for name, model in (("static", static), ("minilm", minilm)):
        started = time.perf_counter()
        model.embed(texts)
        per_text = (time.perf_counter() - started) * 1000 / len(texts)
        print(f"{name}: {per_text:.3f} ms per text ({len(texts)} LoCoMo turns, one thread)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
