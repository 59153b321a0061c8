"""The two scores bench/locomo_feedback.py measured (docs/benchmarks.md "Evidence the final
score cannot see") score what their docstrings say: feedback rewards the top facts' specific
words, and the bridge only a fact joined to two different top facts."""

from __future__ import annotations

import numpy as np

from bench.locomo_feedback import bridge, feedback

# Candidates 0 and 1 rank first; 2 shares a word with 0 only; 3 with both 0 and 1; 4 nothing
# but the query's word and a common one.
_RECORD = {
    "qterms": ["melani"],
    "terms": [
        ["melani", "potteri", "class"],
        ["melani", "camp", "forest"],
        ["melani", "potteri", "bowl"],
        ["melani", "potteri", "camp"],
        ["melani", "said", "thank"],
    ],
    "ents": [[], [], [], [], []],
    "idf": {
        "melani": 0.7,
        "potteri": 4.0,
        "class": 3.0,
        "camp": 4.0,
        "forest": 3.5,
        "bowl": 3.5,
        "said": 0.5,
        "thank": 1.0,
    },
}
_FINAL = np.array([1.0, 0.9, 0.2, 0.1, 0.0])


def test_the_bridge_scores_only_a_fact_joined_to_two_top_facts() -> None:
    scores = bridge(_RECORD, _FINAL, depth=2, min_idf=2.0, entities=False)
    assert scores[3] == 1.0
    assert scores[2] == 0.0
    assert scores[4] == 0.0


def test_feedback_rewards_the_top_facts_specific_words_not_the_querys() -> None:
    scores = feedback(_RECORD, _FINAL, depth=2, terms=10, min_idf=2.0)
    assert scores[3] > scores[2] > scores[4]
    assert scores[4] == 0.0
