"""Claims, contradictions, revised statements and freshness: the pure parts of the local
path."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from engine.consolidation.claims import Claim, parse_claim, timeless
from engine.consolidation.freshness import freshness_trend
from engine.consolidation.relations import relate, relate_claims, revised_statement, text_relation


def claim(text: str) -> Claim:
    parsed = parse_claim(text)
    assert parsed is not None, text
    return parsed


@pytest.mark.parametrize(
    ("text", "aspect", "polarity", "value"),
    [
        ("Alice struggles with async Python.", "competence", -1, "async Python"),
        ("I struggle with async Python.", "competence", -1, "async Python"),
        (
            "Alice wrote async database calls today (15 January 2024).",
            "competence",
            1,
            "async database calls",
        ),
        ("Alice is not comfortable with Rust.", "competence", -1, "Rust"),
        ("Alice finds Haskell hard.", "competence", -1, "Haskell"),
        ("The team prefers Postgres over MySQL.", "preference", 1, "Postgres"),
        (
            "The team does not want a separate vector store.",
            "liking",
            -1,
            "a separate vector store",
        ),
        ("Bob moved to Berlin.", "residence", 1, "Berlin"),
        ("Ivo works as a lighthouse keeper.", "occupation", 1, "lighthouse keeper"),
        ("Alice's favorite color is blue.", "favourite color", 1, "blue"),
        ("Alice is 34 years old.", "age", 1, "34"),
    ],
)
def test_claims_parse(text: str, aspect: str, polarity: int, value: str) -> None:
    parsed = claim(text)
    assert (parsed.aspect, parsed.polarity, parsed.object) == (aspect, polarity, value)


@pytest.mark.parametrize(
    "text", ["Caroline went to a support group yesterday (7 May 2023).", "Hello there!", ""]
)
def test_events_and_chatter_are_not_claims(text: str) -> None:
    assert parse_claim(text) is None


def test_a_negation_flip_on_one_topic_contradicts() -> None:
    old, new = claim("Alice struggles with async Python."), claim("Alice wrote async code.")
    relation = relate_claims(old, new)
    assert relation.kind == "contradicts" and "negation flip" in relation.reason
    elsewhere = claim("Alice wrote a novel.")
    assert relate_claims(old, elsewhere).kind == "unrelated"


def test_an_exclusive_attribute_changing_value_contradicts() -> None:
    assert relate_claims(claim("Bob lives in Paris."), claim("Bob moved to Berlin.")).kind == (
        "contradicts"
    )
    assert relate_claims(claim("Bob lives in Paris."), claim("Bob lives in Paris.")).kind == (
        "supports"
    )
    # liking is not exclusive: liking cats says nothing against liking dogs
    assert relate_claims(claim("Eve likes dogs."), claim("Eve likes cats.")).kind == "unrelated"


def test_text_guards_catch_what_claims_do_not_parse() -> None:
    assert text_relation("Alice has two kids.", "Alice has three kids.").kind == "contradicts"
    assert text_relation("Sam plays chess.", "Sam never plays chess.").reason == "negation flip"
    # dates written out by retain are not values of the belief
    dated = ("Sam went hiking yesterday (7 May 2023).", "Sam went hiking on 14 May 2023.")
    assert text_relation(*dated).kind == "supports"
    # numbers of events tell different events apart; they do not contradict each other
    days = ("Ana tried 3 new dishes on day 1.", "Ana tried 5 new dishes on day 2.")
    assert text_relation(*days).kind == "unrelated"
    assert text_relation("Ana has 2 cats.", "Ana has 3 cats and 2 dogs.").kind == "unrelated"
    assert relate(None, "Sam plays chess.", None, "Sam plays chess weekly.", 0.95, 0.88).kind == (
        "supports"
    )
    assert relate(None, "Sam plays chess.", None, "Sam cooks.", 0.5, 0.88).kind == "unrelated"
    different_people = relate(claim("Finn prefers tea."), "", claim("Gus prefers tea."), "", 1, 0)
    assert different_people.kind == "unrelated"


def test_revised_statements_say_what_no_longer_holds() -> None:
    old, new = "Alice struggles with async Python.", "Alice wrote async calls today (15 May 2024)."
    assert revised_statement(old, new, claim(old), claim(new)) == (
        "Alice is growing comfortable with async Python and no longer struggles with it: "
        "Alice wrote async calls."
    )
    assert (
        revised_statement(
            "Bob lives in Paris.",
            "Bob lives in Berlin.",
            claim("Bob lives in Paris."),
            claim("Bob lives in Berlin."),
        )
        == "Bob lives in Berlin, and no longer lives in Paris."
    )
    assert revised_statement("Sam plays chess.", "Sam never plays chess.", None, None) == (
        "Sam never plays chess (previously: Sam plays chess)."
    )


def test_timeless_drops_the_dates_retain_wrote_in() -> None:
    assert timeless("Caroline went to a support group yesterday (7 May 2023).") == (
        "Caroline went to a support group."
    )
    assert timeless("Bob lives in Oslo.") == "Bob lives in Oslo."


def days(*offsets: int) -> list[datetime]:
    start = datetime(2024, 1, 1, tzinfo=UTC)
    return [start + timedelta(days=d) for d in offsets]


@pytest.mark.parametrize(
    ("offsets", "as_of", "trend"),
    [
        ((0,), 0, "new"),
        ((0, 7, 14), 14, "stable"),
        ((0, 30, 40, 44, 46), 46, "strengthening"),
        ((0, 2, 6, 20, 60), 60, "weakening"),
        ((0, 7), 60, "weakening"),  # silent for 8 times its usual gap
        ((0, 7, 14), 400, "stale"),
        ((), 0, "stale"),
    ],
)
def test_freshness_trend(offsets: tuple[int, ...], as_of: int, trend: str) -> None:
    assert freshness_trend(days(*offsets), days(as_of)[0]) == trend
