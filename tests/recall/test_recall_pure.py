"""The pure parts of recall: fusion, MMR, the token budget, token vectors, scoring."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import MappingProxyType, SimpleNamespace
from typing import cast

import numpy as np
import pytest

from engine.db import Pool
from engine.errors import ConfigurationError
from engine.recall.budget import estimate_tokens, fill_budget
from engine.recall.config import RecallConfig
from engine.recall.fusion import fuse_rrf, seeds_of, shortlist
from engine.recall.graph import GraphWalk
from engine.recall.graph_memory import BankGraph, FactQuery, Facts, visible_for
from engine.recall.graph_types import Step, graph_work
from engine.recall.mmr import mmr_order
from engine.recall.scoring import combined_scores, normalise, proximity, recency
from engine.recall.types import (
    ArmHit,
    ArmName,
    ArmResult,
    CandidateRow,
    RecallRequest,
    TimeWindow,
)
from engine.recall.vectors import decode_token_vectors, encode_token_vectors, query_side

WEIGHTS: MappingProxyType[ArmName, float] = MappingProxyType(
    {"semantic": 1.0, "keyword": 2.0, "graph": 0.0, "temporal": 1.0}
)
CAPS: MappingProxyType[ArmName, int] = MappingProxyType(
    {"semantic": 10, "keyword": 10, "graph": 10, "temporal": 1}
)


def arm(name: ArmName, *ids: str) -> ArmResult:
    return ArmResult(name, [ArmHit(i, 1.0 / (n + 1)) for n, i in enumerate(ids)], 0.0)


def test_rrf_sums_weighted_reciprocal_ranks() -> None:
    fused = fuse_rrf(
        [arm("semantic", "a", "b"), arm("keyword", "b", "c")], k=60, weights=WEIGHTS, caps=CAPS
    )
    scores = {f.unit_id: f.score for f in fused}
    assert scores["a"] == pytest.approx(1 / 61)
    assert scores["b"] == pytest.approx(1 / 62 + 2 / 61)
    assert scores["c"] == pytest.approx(2 / 62)
    assert [f.unit_id for f in fused] == ["b", "c", "a"]
    assert fused[0].ranks == {"semantic": 2, "keyword": 1}


def test_rrf_weight_zero_and_caps_add_nothing_but_keep_ranks_visible() -> None:
    fused = fuse_rrf(
        [arm("graph", "g"), arm("temporal", "t1", "t2"), arm("semantic", "t2")],
        k=60,
        weights=WEIGHTS,
        caps=CAPS,
    )
    assert fused[-1].unit_id == "g" and fused[-1].score == 0  # weight 0: found, adds nothing
    t2 = next(f for f in fused if f.unit_id == "t2")
    assert t2.score == pytest.approx(1 / 61)  # temporal rank 2 is past the cap of 1
    assert t2.ranks == {"temporal": 2, "semantic": 1}


def test_rrf_ties_break_by_id() -> None:
    fused = fuse_rrf([arm("semantic", "z"), arm("temporal", "a")], k=60, weights=WEIGHTS, caps=CAPS)
    assert [f.unit_id for f in fused] == ["a", "z"]


def test_shortlist_reserves_each_arms_first_hits() -> None:
    arms = [arm("semantic", "a", "b", "c"), arm("keyword", "a", "b"), arm("graph", "z", "y")]
    fused = fuse_rrf(arms, k=60, weights=WEIGHTS, caps=CAPS)
    reserve: MappingProxyType[ArmName, int] = MappingProxyType({"graph": 1})
    assert [f.unit_id for f in shortlist(fused, arms, 2, reserve)] == ["a", "b", "z"]


def test_graph_seeds_take_each_arms_best_ranks() -> None:
    seeds = seeds_of([arm("semantic", "a", "b", "c"), arm("keyword", "c", "d")], per_arm=2)
    assert seeds == [("a", 0.5), ("c", 0.5), ("b", pytest.approx(1 / 3)), ("d", 1 / 3)]


def unit(*values: float) -> np.ndarray:
    v = np.asarray(values, dtype=np.float32)
    out: np.ndarray = v / np.linalg.norm(v)
    return out


def test_mmr_with_lambda_one_keeps_relevance_order() -> None:
    vectors = np.stack([unit(1, 0), unit(1, 0.01), unit(0, 1)])
    assert mmr_order([0.9, 0.8, 0.1], vectors, 1.0) == [0, 1, 2]


def test_mmr_pushes_a_near_duplicate_below_a_novel_candidate() -> None:
    vectors = np.stack([unit(1, 0), unit(1, 0.01), unit(0, 1)])
    assert mmr_order([0.9, 0.85, 0.7], vectors, 0.5) == [0, 2, 1]


def test_mmr_lets_a_later_tier_suppress_nothing_shown_before_it() -> None:
    # 0 ranks first but sits in a later tier (e.g. an observation not yet known at the
    # query's time); its near-duplicate 1 must not be pushed below the novel 2 for it.
    vectors = np.stack([unit(1, 0), unit(1, 0.01), unit(0, 1)])
    assert mmr_order([0.9, 0.85, 0.7], vectors, 0.5) == [0, 2, 1]
    assert mmr_order([0.9, 0.85, 0.7], vectors, 0.5, tiers=[1, 0, 0]) == [1, 2, 0]
    assert mmr_order([0.9, 0.85, 0.7], vectors, 1.0, tiers=[1, 0, 0]) == [1, 2, 0]


def test_mmr_rejects_lambda_outside_unit_interval() -> None:
    with pytest.raises(ValueError, match="lambda"):
        mmr_order([1.0], np.stack([unit(1, 0)]), 1.5)


def test_budget_skips_what_does_not_fit_and_keeps_going() -> None:
    kept, used = fill_budget([5, 8, 3, 2], lambda n: n, 10)
    assert kept == [5, 3, 2] and used == 10


def test_budget_returns_an_oversized_first_item_alone() -> None:
    kept, used = fill_budget([50, 1, 1], lambda n: n, 10)
    assert kept == [50] and used == 50


def test_budget_never_returns_more_than_fits_after_the_first() -> None:
    kept, _ = fill_budget([4, 50, 7], lambda n: n, 10)
    assert kept == [4]


def test_token_estimate_is_a_quarter_of_the_characters_rounded_up() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcd") == 1
    assert estimate_tokens("abcde") == 2


@pytest.mark.parametrize(("dimension", "first"), [(384, 192), (7, 4), (3, 2)])
def test_token_vectors_round_trip_within_int4_precision(dimension: int, first: int) -> None:
    rng = np.random.default_rng(7)
    tokens = rng.standard_normal((13, dimension)).astype(np.float32)
    tokens /= np.linalg.norm(tokens, axis=1, keepdims=True)
    blob = encode_token_vectors(tokens)
    kept = dimension - first  # the dimensions of the last half of a full-width row's bytes
    assert len(blob) == 13 * ((kept + 1) // 2 + 2)
    decoded = decode_token_vectors(blob, dimension)
    assert decoded.shape == (13, kept)
    stored = tokens[:, first:]
    # Half a bin: 8 · max|row| / 127 of the row's largest value (over the whole row).
    assert (np.abs(decoded - stored) <= np.abs(tokens).max(axis=1, keepdims=True) / 15).all()


def test_stored_token_rows_keep_the_direction_of_their_half() -> None:
    rng = np.random.default_rng(7)
    tokens = rng.standard_normal((13, 384)).astype(np.float32)
    decoded = decode_token_vectors(encode_token_vectors(tokens), 384)
    stored = tokens[:, 192:]
    norms = np.linalg.norm(decoded, axis=1) * np.linalg.norm(stored, axis=1)
    assert ((decoded * stored).sum(axis=1) / norms).min() > 0.98


def test_query_side_products_are_on_the_full_inner_products_scale() -> None:
    """Stored rows keep the second half of the dimensions; with it a copy of the first, the
    scaled half-width product is the full one (to int4 precision)."""
    rng = np.random.default_rng(11)
    query = np.tile(rng.standard_normal((6, 192)), 2).astype(np.float32)
    stored = np.tile(rng.standard_normal((6, 192)), 2).astype(np.float32)
    query /= np.linalg.norm(query, axis=1, keepdims=True)
    stored /= np.linalg.norm(stored, axis=1, keepdims=True)
    decoded = decode_token_vectors(encode_token_vectors(stored), 384)
    estimate = (query_side(query) * decoded).sum(axis=1)
    assert np.abs(estimate - (query * stored).sum(axis=1)).max() < 0.03


def test_empty_token_vectors_encode_to_nothing() -> None:
    assert encode_token_vectors(np.zeros((0, 384), dtype=np.float32)) == b""
    assert decode_token_vectors(b"", 384).shape == (0, 192)
    with pytest.raises(ValueError, match="not n x"):
        decode_token_vectors(b"\x00" * 10, 384)


def row(
    occurred: datetime | None = None,
    mentioned: datetime | None = None,
    proof: int = 1,
    text: str = "t",
) -> CandidateRow:
    return CandidateRow(
        id="x",
        fact_type="world",
        text=text,
        context="",
        occurred_start=occurred,
        occurred_end=None,
        mentioned_at=mentioned,
        document_id=None,
        chunk_id=None,
        metadata={},
        tags=[],
        proof_count=proof,
        embedding=unit(1, 0),
        token_vectors=None,
        entities=[],
    )


MAY_1 = datetime(2023, 5, 1, tzinfo=UTC)


def test_recency_halves_every_half_life() -> None:
    assert recency(row(occurred=MAY_1), MAY_1 + timedelta(days=10), 10) == pytest.approx(0.5)
    assert recency(row(), MAY_1, 10) == 0.0


def test_proximity_is_one_inside_the_window_and_decays_outside() -> None:
    window = TimeWindow(MAY_1, MAY_1 + timedelta(days=7))
    assert proximity(row(occurred=MAY_1 + timedelta(days=3)), window) == 1.0
    assert proximity(row(mentioned=MAY_1 + timedelta(days=14)), window) == pytest.approx(0.5)
    assert proximity(row(), window) == 0.0


def test_combined_scores_add_only_weighted_boosts() -> None:
    rows = [row(occurred=MAY_1), row(occurred=MAY_1 - timedelta(days=300))]
    window = TimeWindow(MAY_1, MAY_1 + timedelta(days=1))
    config = RecallConfig(rerank_weight=1.0, recency_weight=0.0, temporal_weight=0.5)
    finals = combined_scores(
        rows,
        [0.2, 0.1],
        [0.3, 0.6],
        reference=MAY_1,
        window=window,
        prefer_observations=False,
        config=config,
    )
    # reranker decides the base (0 and 1 after normalising); the window adds 0.5 to the first
    assert finals[0] == pytest.approx(0.5)
    assert finals[1] == pytest.approx(1.0 + 0.5 / (1 + 300))  # 300 days from a 1-day window


def test_reranker_weight_shrinks_with_the_share_of_the_query_it_understands() -> None:
    rows = [row(), row()]
    config = RecallConfig(rerank_weight=0.9, recency_weight=0.0)

    def ranked(understood: float) -> list[float]:
        return combined_scores(
            rows,
            [0.6, 0.1],  # fusion (BM25 over Chinese words) prefers the first
            [0.1, 0.6],  # MaxSim over [UNK] tokens prefers the second
            reference=MAY_1,
            window=None,
            prefer_observations=False,
            config=config,
            understood=understood,
        )

    english, chinese = ranked(1.0), ranked(0.2)
    assert english[1] > english[0]
    assert chinese[0] > chinese[1]


def test_a_question_scores_below_a_statement_as_relevant() -> None:
    rows = [
        row(text="Caroline: Seen any good movies lately? "),
        row(text="陈默：为什么？"),
        row(text="Caroline saw Heat."),
    ]
    config = RecallConfig(question_penalty=0.2)
    finals = combined_scores(
        rows,
        [0.2, 0.2, 0.2],
        [0.5, 0.5, 0.5],
        reference=MAY_1,
        window=None,
        prefer_observations=False,
        config=config,
    )
    assert finals == pytest.approx([0.8, 0.8, 1.0])


def test_the_temporal_rank_and_the_query_words_add_their_weights() -> None:
    rows = [row(text="Melanie went camping."), row(text="Melanie: I love camping at the beach!")]
    config = RecallConfig(temporal_rank_weight=0.25, term_overlap_weight=0.1, rrf_k=60)
    finals = combined_scores(
        rows,
        [0.2, 0.2],
        [0.5, 0.5],
        reference=MAY_1,
        window=None,
        prefer_observations=False,
        config=config,
        temporal_ranks=[1, None],
        query="Where has Melanie camped at the beach?",
    )
    # 7 query words; the first fact shares "melanie", the second "melanie", "at", "the", "beach"
    assert finals[0] == pytest.approx(1.0 + 0.25 * 60 / 61 + 0.1 * 1 / 7)
    assert finals[1] == pytest.approx(1.0 + 0.1 * 4 / 7)


def test_a_question_asking_when_raises_dated_facts_by_their_relevance() -> None:
    rows = [
        row(text="小林：重写的稿子下午给你。"),
        row(text="小林：对，下周三之前要交。", occurred=MAY_1),
        row(text="团子生病了。", occurred=MAY_1),
    ]
    config = RecallConfig(rerank_weight=1.0, recency_weight=0.0, dated_answer_weight=0.4)

    def finals(asks_time: bool) -> list[float]:
        return combined_scores(
            rows,
            [0.2, 0.1, 0.0],
            [0.9, 0.7, 0.1],  # normalised: 1.0, 0.75, 0.0
            reference=MAY_1,
            window=None,
            prefer_observations=False,
            config=config,
            asks_time=asks_time,
        )

    assert finals(False) == pytest.approx([1.0, 0.75, 0.0])
    # the dated answer overtakes; the dated but irrelevant fact gains nothing
    assert finals(True) == pytest.approx([1.0, 0.75 * 1.4, 0.0])


def test_normalise_maps_to_unit_interval() -> None:
    assert normalise([2.0, 4.0, 3.0]) == [0.0, 1.0, 0.5]
    assert normalise([1.0, 1.0]) == [1.0, 1.0]


def test_config_rejects_an_mmr_lambda_outside_unit_interval() -> None:
    with pytest.raises(ConfigurationError, match="mmr_lambda"):
        RecallConfig(mmr_lambda=2.0)


def test_a_facts_path_is_the_one_its_strength_came_from_whichever_walk_moves_first() -> None:
    # The named walk reaches "runs" through Alice, the seeds' walk reaches it more strongly
    # from a seed, and then the named walk's next hop reaches "outage" from "runs": the
    # outage's strength came through Alice, so its path must say so, even though the seeds'
    # walk changed the best path of "runs" in between (the two walks run concurrently).
    config = RecallConfig()
    work = graph_work(config, config.budget("mid"))
    walk = GraphWalk(cast(Pool, None), RecallRequest("b", "Alice"), np.zeros(4, np.float32), work)
    named: dict[str, tuple[str, ...]] = {}
    seeds: dict[str, tuple[str, ...]] = {"lead": ("seed", "lead")}
    walk._absorb([Step("lead", None, "entity:Alice", "entity_named", 0.5, 0.1)], named)
    walk._absorb([Step("runs", "lead", "term:atlas", "term_shared", 0.3, 0.1)], named)
    walk._absorb([Step("runs", "lead", "term:atlas", "term_shared", 0.4, 0.1)], seeds)
    walk._absorb([Step("outage", "runs", "term:cluster", "term_shared", 0.2, 0.1)], named)
    assert walk.paths["runs"] == ("seed", "lead", "term:atlas", "runs")
    assert walk.paths["outage"] == (
        "entity:Alice", "lead", "term:atlas", "runs", "term:cluster", "outage",
    )  # fmt: skip


def test_a_facts_similarity_is_the_same_whatever_batch_it_is_computed_in() -> None:
    # The graph arm's two walks run concurrently and both set the similarity of a fact they
    # reach: it must not depend on the batch (hop) it was computed in, or the arm's scores
    # follow the walks' timing (float32 products differed in the last bit with the batch).
    rng = np.random.default_rng(5)
    vectors = rng.standard_normal((400, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    embeddings = vectors.astype(np.float16)
    wide = embeddings.astype(np.float32)
    facts = Facts(
        ids=[f"f{n}" for n in range(400)],
        index={f"f{n}": n for n in range(400)},
        embeddings=embeddings,
        squares=np.einsum("ij,ij->i", wide, wide),
        types=np.zeros(400, dtype=np.int8),
        states=np.zeros(400, dtype=np.int8),
        tags={},
    )
    graph = cast(BankGraph, SimpleNamespace(facts=facts))
    query = FactQuery(graph, vectors[0] + vectors[1], visible_for(RecallRequest("b", "q")))
    every = query.similarities(list(range(400)))
    for unit in range(0, 400, 3):
        assert query.similarities([unit]) == [every[unit]]
        others = rng.choice(400, size=int(rng.integers(1, 120)), replace=False).tolist()
        assert query.similarities([*others, unit])[-1] == every[unit]
