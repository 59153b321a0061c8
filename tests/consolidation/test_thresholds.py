"""The measured choice of JOIN_SIMILARITY and MERGE_SIMILARITY (engine/consolidation/
thresholds.py), re-measured on the default model: same beliefs in other words are kept
together, different beliefs kept apart, with the text guards for what cosine cannot see."""

from __future__ import annotations

import pytest

from engine.consolidation.claims import parse_claim
from engine.consolidation.relations import relate
from engine.consolidation.thresholds import JOIN_SIMILARITY, MERGE_SIMILARITY
from engine.embedding import Embedder

SAME = [
    ("Alice struggles with async Python.", "Alice struggles with asynchronous Python."),
    ("Alice struggles with async Python.", "Alice has trouble with async Python code."),
    ("Alice struggles with async Python.", "Alice finds async Python hard."),
    ("Alice plays tennis on weekends.", "Alice plays tennis every weekend."),
    ("Alice loves hiking in the Alps.", "Alice loves hiking in the Alps every summer."),
    ("The team prefers Postgres.", "The team prefers PostgreSQL."),
    ("Bob lives in Paris.", "Bob is living in Paris."),
    ("Bob works at Google.", "Bob is employed by Google."),
    ("Melanie paints landscapes.", "Melanie likes painting landscapes."),
    ("Caroline volunteers at the LGBTQ center.", "Caroline volunteers at an LGBTQ center."),
    ("Jon is learning Spanish.", "Jon is studying Spanish."),
    ("The user prefers dark mode.", "The user likes dark mode better."),
    ("Alice drinks coffee every morning.", "Every morning Alice drinks coffee."),
    ("Sam is allergic to peanuts.", "Sam has a peanut allergy."),
    ("Alice runs marathons.", "Alice is a marathon runner."),
]
# A fact that is evidence for a belief, not the belief itself: it may join the observation
# (JOIN_SIMILARITY), but two observations stating them stay apart (MERGE_SIMILARITY).
EVIDENCE = ("Alice loves hiking in the Alps.", "Alice went hiking in the Alps.")
DIFFERENT = [
    ("Alice plays tennis on weekends.", "Alice plays chess on weekends."),
    ("Alice plays tennis on weekends.", "Bob plays tennis on weekends."),
    ("Alice works at Google.", "Alice works at Microsoft."),
    ("Bob lives in Paris.", "Bob lives in Berlin."),
    ("Alice prefers tea.", "Alice prefers coffee."),
    ("Alice is comfortable with async Python.", "Alice is not comfortable with async Python."),
    ("Alice struggles with async Python.", "Alice is comfortable with async Python."),
    ("Alice likes dogs.", "Alice dislikes dogs."),
    ("Alice likes dogs.", "Alice likes cats."),
    ("Jon is learning Spanish.", "Jon is learning French."),
    ("Sam is allergic to peanuts.", "Sam is allergic to shellfish."),
    ("Alice drinks coffee every morning.", "Alice drinks tea every morning."),
    ("Melanie paints landscapes.", "Melanie paints portraits."),
    ("Caroline volunteers at the LGBTQ center.", "Melanie volunteers at the LGBTQ center."),
    ("The user prefers dark mode.", "The user prefers light mode."),
    ("Alice runs marathons.", "Alice runs a bakery."),
    ("Alice has two kids.", "Alice has three kids."),
]


def similarity(embedder: Embedder, a: str, b: str) -> float:
    vectors = embedder.embed([a, b])
    return float(vectors[0] @ vectors[1])


@pytest.mark.parametrize("threshold", [JOIN_SIMILARITY, MERGE_SIMILARITY])
def test_the_same_belief_in_other_words_is_kept_together(
    embedder: Embedder, threshold: float
) -> None:
    apart = []
    for a, b in SAME:
        sim = similarity(embedder, a, b)
        relation = relate(parse_claim(a), a, parse_claim(b), b, sim, threshold)
        if relation.kind != "supports":
            apart.append((a, b, round(sim, 3), relation.kind))
    assert apart == []


@pytest.mark.parametrize("threshold", [JOIN_SIMILARITY, MERGE_SIMILARITY])
def test_different_beliefs_are_never_taken_for_one(embedder: Embedder, threshold: float) -> None:
    together = []
    for a, b in DIFFERENT:
        sim = similarity(embedder, a, b)
        relation = relate(parse_claim(a), a, parse_claim(b), b, sim, threshold)
        if relation.kind == "supports":
            together.append((a, b, round(sim, 3)))
    assert together == []


def test_evidence_joins_a_belief_but_is_not_merged_with_it(embedder: Embedder) -> None:
    a, b = EVIDENCE
    sim = similarity(embedder, a, b)
    assert JOIN_SIMILARITY <= sim < MERGE_SIMILARITY
    assert relate(parse_claim(a), a, parse_claim(b), b, sim, JOIN_SIMILARITY).kind == "supports"
    assert relate(parse_claim(a), a, parse_claim(b), b, sim, MERGE_SIMILARITY).kind == "unrelated"


def test_cosine_alone_would_merge_the_guarded_pairs(embedder: Embedder) -> None:
    """Why the guards exist: a negation and a changed number score above MERGE_SIMILARITY."""
    negation = (
        "Alice is comfortable with async Python.",
        "Alice is not comfortable with async Python.",
    )
    number = ("Alice has two kids.", "Alice has three kids.")
    assert negation in DIFFERENT and number in DIFFERENT
    assert similarity(embedder, *negation) >= MERGE_SIMILARITY
    assert similarity(embedder, *number) >= MERGE_SIMILARITY
