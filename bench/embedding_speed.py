"""Embedding speed and agreement: the int8 MiniLM graph (`minilm`, the default) against the
shipped graph run as it is (`minilm-fp32`), over facts the local extractor makes from LoCoMo.

    .venv/bin/python -m bench.embedding_speed            # --facts 3000 --threads 1

Per variant: CPU seconds of `embed_with_tokens` over the facts (one model thread, the texts in
the retain pipeline's model batches), texts and tokens per CPU second, and how the vectors
compare with the fp32 graph's: cosine mean / minimum, the token vectors' mean cosine, and
the largest difference between a text's vector alone and in its batch.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Final

import numpy as np

from bench.locomo_data import DEFAULT_DATA, load_locomo
from engine.embedding import DEFAULT_BATCH_SIZE, MiniLMEmbedder
from engine.extraction.local import LocalExtractor
from engine.retain.staging import model_batches
from engine.types import ItemContext

VARIANTS: Final = (
    # name, quantised, texts per model run
    ("minilm-fp32, batched (before)", False, DEFAULT_BATCH_SIZE),
    ("minilm int8, one text per run", True, 1),
    ("minilm int8, batched (default)", True, DEFAULT_BATCH_SIZE),
)


def locomo_facts(data: Path, limit: int) -> list[str]:
    """Fact texts as the local extractor writes them, every conversation's turns in order,
    spread over all ten conversations."""
    extractor = LocalExtractor()
    facts: list[str] = []
    for conversation in load_locomo(data).conversations:
        for turn in conversation.turns:
            item = ItemContext(mentioned_at=turn.timestamp, speaker=turn.speaker)
            facts.extend(f.text for f in extractor.extract(turn.content, item))
    step = max(1, len(facts) // limit)
    return facts[::step][:limit]


def measure(
    embedder: MiniLMEmbedder, texts: list[str]
) -> tuple[float, np.ndarray, list[np.ndarray]]:
    embedder.embed_with_tokens(texts[:32])  # warm-up
    vectors = np.empty((len(texts), embedder.dimension), dtype=np.float32)
    tokens: list[np.ndarray] = [np.empty(0)] * len(texts)
    started = time.process_time()
    for run in model_batches(texts):
        pooled, states = embedder.embed_with_tokens([texts[i] for i in run])
        vectors[run] = pooled
        for i, matrix in zip(run, states, strict=True):
            tokens[i] = matrix
    return time.process_time() - started, vectors, tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--facts", type=int, default=3000)
    parser.add_argument("--threads", type=int, default=1, help="ONNX Runtime intra-op threads")
    args = parser.parse_args()
    texts = locomo_facts(args.data, args.facts)
    reference: tuple[np.ndarray, list[np.ndarray]] | None = None
    token_count = sum(MiniLMEmbedder(quantised=False).token_counts(texts))
    print(f"{len(texts):,} LoCoMo facts, {token_count:,} tokens, {args.threads} thread(s)")
    print(
        f"{'variant':42} {'CPU s':>7} {'texts/s':>8} {'tokens/s':>9} {'cos mean':>9} "
        f"{'cos min':>8} {'tokens cos':>10} {'alone vs batched':>17}"
    )
    for name, quantised, batch in VARIANTS:
        embedder = MiniLMEmbedder(
            quantised=quantised, batch_size=batch, intra_op_threads=args.threads
        )
        cpu, vectors, tokens = measure(embedder, texts)
        if reference is None:
            reference = (vectors, tokens)
        cosines = (vectors * reference[0]).sum(axis=1)
        token_cosines = [
            float((mine * theirs).sum(axis=1).mean())
            for mine, theirs in zip(tokens, reference[1], strict=True)
            if len(theirs)
        ]
        alone = np.concatenate([embedder.embed([t]) for t in texts[:64]])
        drift = float(np.abs(alone - vectors[:64]).max())
        print(
            f"{name:42} {cpu:7.1f} {len(texts) / cpu:8.0f} {token_count / cpu:9.0f} "
            f"{cosines.mean():9.4f} {cosines.min():8.4f} {np.mean(token_cosines):10.4f} "
            f"{drift:17.1e}",
            flush=True,
        )


if __name__ == "__main__":
    main()
