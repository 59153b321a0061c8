"""Entity resolution: a table of merge/new decisions, plus the properties resolve relies on."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from engine.entities import (
    RECENCY_HALF_LIFE_DAYS,
    W_NAME,
    W_RECENCY,
    Candidate,
    Mention,
    jaro_winkler,
    normalize_name,
    resolve_mention,
    trigram_similarity,
)
from engine.errors import InvalidInput

NOW = datetime(2024, 6, 1, 12, tzinfo=UTC)
# Entities already resolved for the other mentions of the fact: "friends" of the mention.
FRIENDS = frozenset({"f1", "f2", "f3"})


def cand(
    entity_id: str,
    name: str,
    kind: str = "person",
    *,
    aliases: tuple[str, ...] = (),
    shared: int = 0,
    days_ago: float | None = None,
) -> Candidate:
    """A candidate that has co-occurred with `shared` of FRIENDS (and one stranger)."""
    cooccurring = frozenset(sorted(FRIENDS)[:shared]) | {f"{entity_id}-stranger"}
    last_seen = None if days_ago is None else NOW - timedelta(days=days_ago)
    return Candidate(entity_id, name, aliases, kind, last_seen, cooccurring)


def ment(name: str, kind: str = "person", others: frozenset[str] = frozenset()) -> Mention:
    return Mention(name, kind, NOW, others)


@dataclass(frozen=True)
class Case:
    id: str
    mention: Mention
    candidates: tuple[Candidate, ...]
    expected: str | None  # entity id to merge into; None = create a new entity


CASES = [
    # Hindsight's merges we must never make.
    Case("tigran-vs-iran-place", ment("Tigran"), (cand("iran", "Iran", "place"),), None),
    Case(
        "tigran-vs-iran-person-with-evidence",
        ment("Tigran"),
        (cand("iran", "Iran", shared=3, days_ago=0),),
        None,
    ),
    Case(
        "room-101-vs-102",
        ment("Room 102", "place"),
        (cand("r101", "Room 101", "place", shared=3, days_ago=0),),
        None,
    ),
    Case(
        "room-101-exact", ment("room  101", "place"), (cand("r101", "Room 101", "place"),), "r101"
    ),
    Case(
        "iphone-14-vs-15",
        ment("iPhone 15", "product"),
        (cand("ip14", "iPhone 14", "product", shared=3, days_ago=0),),
        None,
    ),
    Case(
        "apollo-11-vs-13",
        ment("Apollo 13", "event"),
        (cand("a11", "Apollo 11", "event", shared=3, days_ago=0),),
        None,
    ),
    Case(
        "henry-vs-henry-viii",
        ment("Henry"),
        (cand("h8", "Henry VIII", shared=3, days_ago=0),),
        None,
    ),
    Case(
        "john-smith-jr-vs-john-smith",
        ment("John Smith Jr."),
        (cand("js", "John Smith", shared=3, days_ago=0),),
        None,
    ),
    # Different words sharing letters.
    Case("ann-vs-anna-no-evidence", ment("Ann"), (cand("anna", "Anna"),), None),
    Case(
        "ann-vs-anna-evidence-is-not-enough",
        ment("Ann"),
        (cand("anna", "Anna", shared=3, days_ago=0),),
        None,
    ),
    Case("ann-via-explicit-alias", ment("Ann"), (cand("anna", "Anna", aliases=("Ann",)),), "anna"),
    Case(
        "mark-vs-marko-with-evidence",
        ment("Mark"),
        (cand("marko", "Marko", shared=3, days_ago=0),),
        None,
    ),
    Case(
        "gabriel-inside-gabriella-with-evidence",
        ment("Gabriel"),
        (cand("g", "Gabriella", shared=3, days_ago=0),),
        None,
    ),
    Case(
        "jon-vs-john-short-names-never-fuzzy",
        ment("Jon"),
        (cand("john", "John", shared=3, days_ago=0),),
        None,
    ),
    # Typos: only with at least two shared co-occurring entities.
    Case("carolyn-no-evidence", ment("Carolyn"), (cand("c", "Caroline", days_ago=0),), None),
    Case("carolyn-one-shared", ment("Carolyn"), (cand("c", "Caroline", shared=1),), None),
    Case("carolyn-two-shared", ment("Carolyn"), (cand("c", "Caroline", shared=2),), "c"),
    Case(
        "carolyn-smith-typo-in-full-name",
        ment("Carolyn Smith"),
        (cand("cs", "Caroline Smith", shared=2),),
        "cs",
    ),
    Case(
        "carolyn-named-separately-in-same-fact",
        ment("Carolyn", others=frozenset({"Caroline"})),
        (cand("c", "Caroline", shared=3),),
        None,
    ),
    # Partial person names.
    Case(
        "caroline-to-single-full-name-with-cooccurrence",
        ment("Caroline"),
        (cand("cs", "Caroline Smith", shared=1),),
        "cs",
    ),
    Case(
        "caroline-to-single-full-name-seen-recently",
        ment("Caroline"),
        (cand("cs", "Caroline Smith", days_ago=5),),
        "cs",
    ),
    Case(
        "caroline-to-full-name-without-evidence",
        ment("Caroline"),
        (cand("cs", "Caroline Smith", days_ago=120),),
        None,
    ),
    Case(
        "caroline-two-full-names-ambiguous",
        ment("Caroline"),
        (cand("cs", "Caroline Smith", shared=1), cand("cj", "Caroline Jones", shared=1)),
        None,
    ),
    Case(
        "caroline-two-full-names-one-dominant",
        ment("Caroline"),
        (cand("cs", "Caroline Smith", shared=2), cand("cj", "Caroline Jones", days_ago=1)),
        "cs",
    ),
    Case(
        "exact-first-name-beats-full-name",
        ment("Caroline"),
        (cand("cs", "Caroline Smith", shared=3), cand("c", "Caroline")),
        "c",
    ),
    Case(
        "caroline-smith-vs-caroline-jones",
        ment("Caroline Smith"),
        (cand("cj", "Caroline Jones", shared=3, days_ago=0),),
        None,
    ),
    Case(
        "full-name-to-earlier-first-name-entity",
        ment("Caroline Smith"),
        (cand("c", "Caroline", shared=1),),
        "c",
    ),
    Case(
        "full-name-vs-first-name-entity-known-as-someone-else",
        ment("Caroline Smith"),
        (cand("c", "Caroline", aliases=("Caroline Jones",), shared=3),),
        None,
    ),
    Case("dr-smith-no-evidence", ment("Dr. Smith"), (cand("js", "John Smith", days_ago=0),), None),
    Case("dr-smith-one-shared", ment("Dr. Smith"), (cand("js", "John Smith", shared=1),), None),
    Case("dr-smith-two-shared", ment("Dr. Smith"), (cand("js", "John Smith", shared=2),), "js"),
    Case("title-variant-of-full-name", ment("Dr. John Smith"), (cand("js", "John Smith"),), "js"),
    Case("doctor-spelled-out", ment("Doctor Smith"), (cand("ds", "Dr Smith"),), "ds"),
    Case("mr-vs-mrs", ment("Mr. Smith"), (cand("ms", "Mrs. Smith", shared=3, days_ago=0),), None),
    Case(
        "partial-names-only-for-people",
        ment("Google", "organization"),
        (cand("g", "Google Inc", "organization", shared=3, days_ago=0),),
        None,
    ),
    Case(
        "new-york-is-not-new-york-city",
        ment("New York", "place"),
        (cand("nyc", "New York City", "place", shared=3, days_ago=0),),
        None,
    ),
    # Acronyms only through aliases; spelling variants through normalisation.
    Case("nyc-without-alias", ment("NYC", "place"), (cand("nyc", "New York City", "place"),), None),
    Case(
        "nyc-with-alias",
        ment("NYC", "place"),
        (cand("nyc", "New York City", "place", aliases=("NYC",)),),
        "nyc",
    ),
    Case(
        "case-and-whitespace",
        ment("  new   YORK city ", "place"),
        (cand("nyc", "New York City", "place"),),
        "nyc",
    ),
    Case("accents", ment("Jose"), (cand("jose", "José"),), "jose"),
    Case("leading-article", ment("the Louvre", "place"), (cand("l", "Louvre", "place"),), "l"),
    Case(
        "article-and-punctuation",
        ment("The  Google Inc.", "organization"),
        (cand("g", "Google Inc", "organization"),),
        "g",
    ),
    Case("possessive", ment("Melanie's"), (cand("m", "Melanie"),), "m"),
    # CJK names compare as written.
    Case("cjk-exact", ment("王小明"), (cand("w", "王小明"),), "w"),
    Case(
        "cjk-one-character-apart",
        ment("王小明"),
        (cand("w", "王小红", shared=3, days_ago=0),),
        None,
    ),
    # Kinds.
    Case("person-vs-place-same-name", ment("Jordan"), (cand("j", "Jordan", "place"),), None),
    Case("unknown-kind-matches-any", ment("Jordan", "other"), (cand("j", "Jordan", "place"),), "j"),
    Case(
        "same-name-picks-compatible-kind",
        ment("Jordan", "place"),
        (cand("jp", "Jordan", "person"), cand("jc", "Jordan", "place")),
        "jc",
    ),
    Case("no-candidates", ment("Caroline"), (), None),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_resolution_table(case: Case) -> None:
    result = resolve_mention(case.mention, case.candidates, FRIENDS)
    assert result.entity_id == case.expected, result.reason


def test_new_entity_reports_closest_rejection() -> None:
    result = resolve_mention(ment("Ann"), [cand("anna", "Anna", shared=3)], FRIENDS)
    assert result.is_new
    assert result.match == "new"
    assert "'ann' vs 'anna': one word contains the other" in result.reason


def test_exact_match_score_is_name_weight_without_evidence() -> None:
    result = resolve_mention(
        Mention("Melanie", "person", None), [Candidate("m", "Melanie", kind="person")]
    )
    assert result.match == "canonical"
    assert result.score == pytest.approx(W_NAME)


def test_recency_halves_every_half_life() -> None:
    seen = NOW - timedelta(days=RECENCY_HALF_LIFE_DAYS)
    result = resolve_mention(ment("Melanie"), [Candidate("m", "Melanie", (), "person", seen)])
    assert result.score == pytest.approx(W_NAME + W_RECENCY * 0.5)


def test_canonical_name_beats_alias_of_another_entity() -> None:
    candidates = [cand("a", "Anna", aliases=("Ann",), shared=3), cand("b", "Ann")]
    assert resolve_mention(ment("Ann"), candidates, FRIENDS).entity_id == "b"


def test_best_score_wins_among_typo_matches() -> None:
    candidates = [cand("a", "Caroline", shared=2), cand("b", "Caroline", shared=3)]
    assert resolve_mention(ment("Carolyn"), candidates, FRIENDS).entity_id == "b"


def test_ties_break_on_smallest_entity_id() -> None:
    candidates = [cand("b", "Melanie"), cand("a", "Melanie")]
    assert resolve_mention(ment("Melanie"), candidates).entity_id == "a"


def test_resolve_is_deterministic() -> None:
    candidates = [cand("cs", "Caroline Smith", shared=2), cand("c", "Carolyn", shared=2)]
    first = resolve_mention(ment("Caroline"), candidates, FRIENDS)
    assert all(resolve_mention(ment("Caroline"), candidates, FRIENDS) == first for _ in range(10))


def test_resolve_ignores_candidate_order() -> None:
    candidates = [
        cand("c3", "Caroline", aliases=("Caro",), shared=2),
        cand("c1", "Caroline", shared=2),
        cand("cs", "Caroline Smith", shared=3),
        cand("cj", "Caroline Jones"),
        cand("cy", "Carolyn", shared=3),
    ]
    for mention in (ment("Carolyn"), ment("Caroline Smith"), ment("Caro"), ment("Carolina")):
        outcomes = {
            resolve_mention(mention, order, FRIENDS) for order in itertools.permutations(candidates)
        }
        assert len(outcomes) == 1, mention.name


def test_empty_name_is_invalid() -> None:
    with pytest.raises(InvalidInput):
        resolve_mention(ment(" '!? "), [cand("m", "Melanie")])


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("The  Google Inc.", "google inc"),
        ("the google inc", "google inc"),
        ("Melanie's", "melanie"),
        ("Melanie\u2019s", "melanie"),
        ("José", "jose"),
        ("Łódź", "lodz"),
        ("Straße", "strasse"),
        ("ＡＢＣ", "abc"),
        ("U.S.A.", "usa"),
        ("Washington, D.C.", "washington dc"),
        ("Python 3.10", "python 3.10"),
        ("Jean-Luc Picard", "jean luc picard"),
        ("C#", "c#"),
        ("C++", "c++"),
        ("AT&T", "at&t"),
        ("The The", "the"),
        ("zero\u200bwidth", "zerowidth"),
        ("王小明", "王小明"),
        ("ガンダム", "ガンダム"),  # the voicing mark on ガ/ダ is meaning, not an accent
        ("“Room 101.”", "room 101"),
    ],
)
def test_normalize_name(raw: str, expected: str) -> None:
    assert normalize_name(raw) == expected


def test_normalize_name_is_idempotent() -> None:
    names = ["The The Beatles", "Melanie's's", "İstanbul", "e.\u0301x", "Thé Louvre", "’s", "a-.b"]
    for name in names:
        once = normalize_name(name)
        assert normalize_name(once) == once, name


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [  # values from PostgreSQL's own pg_trgm regression output
        ("wow", "WOWa ", 0.5),
        ("wow", " WOW ", 1.0),
        ("---", "####---", 0.0),
        ("qwertyu0988", "qwertyu0980", 0.714286),
        ("qwertyu0988", "qwertyu0088", 0.6),
    ],
)
def test_trigram_similarity_matches_pg_trgm(a: str, b: str, expected: float) -> None:
    assert trigram_similarity(a, b) == pytest.approx(expected, abs=1e-6)


def test_jaro_winkler_reference_values() -> None:
    assert jaro_winkler("martha", "marhta") == pytest.approx(0.9611, abs=1e-4)
    assert jaro_winkler("dixon", "dicksonx") == pytest.approx(0.8133, abs=1e-4)
    assert jaro_winkler("carolyn", "caroline") == pytest.approx(0.9214, abs=1e-4)
