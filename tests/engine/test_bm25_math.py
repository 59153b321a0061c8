"""BM25 reference math: idf, saturation, length normalisation, a hand-computed score."""

from __future__ import annotations

import itertools
import math

import pytest

from engine.bm25 import BM25Params, idf, saturated_tf, score
from engine.errors import InvalidInput

PARAMS = BM25Params()


def one_term_score(tf: int, doc_len: int, params: BM25Params = PARAMS) -> float:
    """Score of a one-term query "x" (df=3 of 50 facts, average length 10)."""
    return score(
        ["x"], {"x": tf}, doc_len=doc_len, avg_len=10.0, df={"x": 3}, n_docs=50, params=params
    )


def test_default_params_are_the_measured_ones() -> None:
    assert (PARAMS.k1, PARAMS.b) == (0.9, 0.4)


def test_idf_decreases_as_document_frequency_grows() -> None:
    values = [idf(100, df) for df in range(1, 101)]
    assert all(a > b for a, b in itertools.pairwise(values))


def test_idf_stays_positive_for_a_term_in_every_document() -> None:
    assert idf(100, 100) > 0


def test_idf_matches_the_simplified_form() -> None:
    assert idf(1000, 37) == pytest.approx(math.log(1001 / 37.5))


def test_idf_rejects_negative_counts() -> None:
    with pytest.raises(InvalidInput):
        idf(10, -1)


def test_tf_saturates_sublinearly() -> None:
    scores = [one_term_score(tf, 10) for tf in range(1, 21)]
    gains = [b - a for a, b in itertools.pairwise(scores)]
    assert all(gain > 0 for gain in gains)
    assert all(a > b for a, b in itertools.pairwise(gains))


def test_term_score_is_bounded_by_k1_plus_one_times_idf() -> None:
    bound = (PARAMS.k1 + 1) * idf(50, 3)
    huge = one_term_score(10**6, 10)
    assert huge < bound
    assert huge == pytest.approx(bound, rel=1e-4)


def test_longer_document_scores_lower_for_the_same_tf() -> None:
    assert one_term_score(2, 5) > one_term_score(2, 30)


def test_b_zero_removes_the_length_effect() -> None:
    flat = BM25Params(k1=0.9, b=0.0)
    assert one_term_score(2, 5, flat) == one_term_score(2, 30, flat)


def test_hand_computed_score() -> None:
    # N=10, k1=0.9, b=0.4, |d|=8, avgdl=10 -> norm = 0.6 + 0.4*0.8 = 0.92, k1*norm = 0.828.
    # "camp": df=2, tf=3 -> ln(11/2.5) * 3*1.9/(3+0.828) = 1.4816045409 * 1.4890282132
    # "room": df=5, tf=1 -> ln(11/5.5) * 1.9/(1+0.828)   = 0.6931471806 * 1.0393873085
    # "tent": not in the document -> 0.  Sum = 2.9265993446
    got = score(
        ["camp", "room", "tent"],
        {"camp": 3, "room": 1, "lake": 4},
        doc_len=8,
        avg_len=10.0,
        df={"camp": 2, "room": 5, "tent": 1, "lake": 1},
        n_docs=10,
        params=PARAMS,
    )
    assert got == pytest.approx(2.9265993446113048, rel=1e-12)


def test_repeated_query_term_counts_once() -> None:
    doc, df = {"x": 2, "y": 1}, {"x": 2, "y": 4}
    twice = score(["x", "x", "y"], doc, doc_len=8, avg_len=10.0, df=df, n_docs=10, params=PARAMS)
    once = score(["x", "y"], doc, doc_len=8, avg_len=10.0, df=df, n_docs=10, params=PARAMS)
    assert twice == once


def test_no_shared_terms_scores_zero() -> None:
    got = score(
        ["a"], {"b": 3}, doc_len=3, avg_len=3.0, df={"a": 1, "b": 1}, n_docs=5, params=PARAMS
    )
    assert got == 0.0


def test_empty_bank_average_length_does_not_divide_by_zero() -> None:
    assert saturated_tf(1, 0, 0.0, PARAMS) == pytest.approx(1.0)


def test_params_reject_b_outside_zero_to_one() -> None:
    with pytest.raises(InvalidInput):
        BM25Params(b=1.5)
