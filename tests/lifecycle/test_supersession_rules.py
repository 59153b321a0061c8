"""The local supersession rules: claims read from English and Chinese cues, and which
pairs of claims supersede (a table of cases)."""

from __future__ import annotations

import pytest

from engine.lifecycle.detect import claim_of, supersedes

PAIRS = [
    # (older, newer, supersedes?)
    ("Maya lives in Lisbon.", "Maya moved to Porto in June.", True),
    ("Maya lives in Lisbon.", "Maya lives in Lisbon with her cat.", False),
    ("Alice works at Acme Corp.", "Alice joined Globex in May.", True),
    ("Alice works at Globex.", "Alice no longer works at Globex.", True),
    ("Alice works at Acme.", "Alice no longer works at Globex.", False),
    ("Keep answers short.", "Give me every step in detail.", True),
    ("Keep answers short.", "Answers should be brief.", False),  # synonyms: same value
    ("Sam's favourite food is sushi.", "Sam's favourite food is now ramen.", True),
    ("Sam's favourite food is sushi.", "Sam's favourite band is Muse.", False),
    ("我住在北京。", "我现在搬到上海了。", True),
    ("我在腾讯工作。", "我现在换到阿里巴巴工作了。", True),
    ("我在腾讯工作。", "我不再在腾讯工作。", True),
    ("回答要简短。", "请详细解释每一步。", True),
    ("会议时间改为周四。", "会议时间改为周五。", True),
    ("Maya lives in Lisbon.", "Alice works at Acme.", False),
    ("The museum has a new wing.", "The museum has two new wings.", False),  # no cue
]


@pytest.mark.parametrize(("older", "newer", "expected"), PAIRS)
def test_supersession_pairs(older: str, newer: str, expected: bool) -> None:
    old, new = claim_of(older), claim_of(newer)
    assert (old is not None and new is not None and supersedes(new, old)) is expected


def test_a_negation_never_gets_superseded_by_its_own_value() -> None:
    gone = claim_of("Alice no longer works at Globex.")
    again = claim_of("Alice works at Globex.")
    assert gone is not None and again is not None
    assert not supersedes(again, gone)  # the rules do not resurrect; a new fact just stands
