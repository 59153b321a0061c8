"""Synthetic memory for the latency benchmark: journal-like facts about people, places,
organisations, projects and events, each dated, and questions that name them with a time.

Deterministic for a seed. Names follow a Zipf-like law (a few people, places and projects
recur in thousands of facts, most in a handful), which is what makes an entity index and a
keyword index behave as they would on a real user's memory: some posting lists are long.
"""

from __future__ import annotations

import calendar
import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

from bench.synthetic_words import (
    ACTIVITIES,
    CITIES,
    EVENTS,
    FIRST,
    FOODS,
    HOBBIES,
    LAST,
    ORG_HEAD,
    ORG_TAIL,
    PET_NAMES,
    PETS,
    PROJECT_ADJ,
    PROJECT_NOUN,
    TOPICS,
    VENUE_ADJ,
    VENUE_KIND,
    VENUE_NOUN,
)
from engine.types import EntityKind, ExtractedEntity, ExtractedFact

MONTHS: Final = list(calendar.month_name)[1:]

# {a}/{b}: people, {city}, {venue}, {org}, {project}, {event}, {hobby}, {food}, {topic},
# {pet}, {pet_name}, {day}: "14 March 2023".
TEMPLATES: Final = (
    "On {day}, {a} flew to {city} for the {project} kickoff with {org}.",
    "{a} and {b} met at the {venue} in {city} on {day} to talk about {topic}.",
    "{a} started working on {project} at {org} on {day}.",
    "{a} presented the {project} roadmap at the {event} in {city} on {day}.",
    "On {day}, {a} adopted a {pet} named {pet_name} from a shelter in {city}.",
    "{a} took up {hobby} in {city} around {day} after {b} recommended it.",
    "{a} cooked {food} for {b} on {day} to celebrate the {event}.",
    "{a} went to {b}'s {event} in {city} on {day}.",
    "On {day}, {a} told {b} that {org} had approved {topic}.",
    "{a} moved from {city} to {city2} on {day} to join {org}.",
    "{a} was stuck on {topic} for {project} on {day} and asked {b} for help.",
    "{a} and {b} spent {day} hiking near {city} and talked about {hobby}.",
    "{a} signed up for a {event} in {city} scheduled for {day}.",
    "On {day}, {a} shipped the first beta of {project} to testers at {org}.",
    "{b} introduced {a} to the team at {org} during the {event} on {day}.",
    "{a} finished reading a book about {hobby} on {day} at the {venue}.",
    "{a} had {food} at the {venue} in {city} with {b} on {day}.",
    "{a} gave a talk on {topic} at {org} in {city} on {day}.",
    "On {day}, {a} and {b} disagreed about {topic} in the {project} design review.",
    "{a} organised the {event} for {org} at the {venue} on {day}.",
    "{a} visited {b} in {city} on {day} and they went {activity}.",
    "On {day}, {a} was promoted to lead {project} at {org}.",
    "{a} left {org} on {day} to start a company with {b}.",
    "{a} lost a wallet at the {venue} in {city} on {day}; {b} found it.",
    "{a} won the {event} in {city} on {day}, beating {b} in the final.",
    "{a} and {b} started a weekly {hobby} group at the {venue} on {day}.",
)

# Relative and absolute time expressions `engine.dates` parses, with the questions' shapes.
QUESTIONS: Final = (
    "What did {a} do in {city} {when}?",
    "Who did {a} meet {when}?",
    "What happened with {project} {when}?",
    "Where did {a} go {when}?",
    "What did {a} and {b} talk about {when}?",
    "Which event did {a} attend {when}?",
    "What was {a} working on at {org} {when}?",
    "Did {a} travel to {city} {when}?",
)
RELATIVE: Final = (
    "yesterday", "last week", "two weeks ago", "last month", "three days ago", "last spring",
    "last summer", "last year", "earlier this month", "last weekend",
)  # fmt: skip


@dataclass(frozen=True)
class SyntheticFact:
    fact: ExtractedFact
    mentioned_at: datetime


@dataclass(frozen=True)
class SyntheticQuery:
    text: str
    reference: datetime  # the query's "now"


class Vocabulary:
    """The world the facts talk about, drawn once per seed."""

    def __init__(self, rng: random.Random, people: int = 6000) -> None:
        names = {f"{rng.choice(FIRST)} {rng.choice(LAST)}" for _ in range(people * 2)}
        self.people = sorted(names)[:people]
        rng.shuffle(self.people)
        self.venues = [f"{a} {n} {k}" for a in VENUE_ADJ for n in VENUE_NOUN for k in VENUE_KIND]
        rng.shuffle(self.venues)
        self.orgs = [f"{h} {t}" for h in ORG_HEAD for t in ORG_TAIL]
        rng.shuffle(self.orgs)
        self.projects = [f"Project {a} {n}" for a in PROJECT_ADJ for n in PROJECT_NOUN]
        rng.shuffle(self.projects)
        self.cities = list(CITIES)
        rng.shuffle(self.cities)


def _zipf(rng: random.Random, items: list[str], s: float = 1.1) -> str:
    """An item with probability ∝ 1 / rank^s (via inverse CDF on a continuous approximation)."""
    n = len(items)
    u = rng.random()
    # Continuous Zipf on [1, n+1): CDF(x) ∝ (x^(1-s) − 1).
    top = (n + 1) ** (1 - s) - 1
    rank = int((u * top + 1) ** (1 / (1 - s))) - 1
    return items[min(max(rank, 0), n - 1)]


def _day(at: datetime) -> str:
    return f"{at.day} {MONTHS[at.month - 1]} {at.year}"


def generate_facts(
    count: int, *, seed: int, start: datetime, days: int
) -> tuple[list[SyntheticFact], Vocabulary]:
    """`count` facts spread evenly over `days` days from `start`, in date order."""
    rng = random.Random(seed)
    vocab = Vocabulary(rng)
    out: list[SyntheticFact] = []
    for i in range(count):
        told = start + timedelta(days=days * i / count, hours=rng.randint(8, 21))
        happened = (told - timedelta(days=rng.choice((0, 0, 0, 1, 2, 5)))).replace(
            hour=0, minute=0, second=0, microsecond=0
        )
        a, b = _zipf(rng, vocab.people), _zipf(rng, vocab.people)
        while b == a:
            b = rng.choice(vocab.people)
        slots = {
            "a": a,
            "b": b,
            "city": _zipf(rng, vocab.cities, 0.9),
            "city2": _zipf(rng, vocab.cities, 0.9),
            "venue": _zipf(rng, vocab.venues),
            "org": _zipf(rng, vocab.orgs),
            "project": _zipf(rng, vocab.projects),
            "event": rng.choice(EVENTS),
            "hobby": rng.choice(HOBBIES),
            "food": rng.choice(FOODS),
            "topic": rng.choice(TOPICS),
            "pet": rng.choice(PETS),
            "pet_name": rng.choice(PET_NAMES),
            "activity": rng.choice(ACTIVITIES),
            "day": _day(happened),
        }
        template = rng.choice(TEMPLATES)
        text = template.format(**slots)
        kinds: tuple[tuple[str, EntityKind], ...] = (
            ("a", "person"),
            ("b", "person"),
            ("city", "place"),
            ("city2", "place"),
            ("venue", "place"),
            ("org", "organization"),
            ("project", "product"),
        )
        entities = [
            ExtractedEntity(slots[key], kind) for key, kind in kinds if "{" + key + "}" in template
        ]
        fact = ExtractedFact(
            text=text,
            fact_type="world" if rng.random() < 0.7 else "experience",
            who=[slots["a"]],
            what=text,
            when=slots["day"],
            occurred_start=happened,
            occurred_end=happened + timedelta(days=1),
            entities=entities,
        )
        out.append(SyntheticFact(fact, told))
    return out, vocab


def generate_queries(
    count: int, vocab: Vocabulary, *, seed: int, start: datetime, days: int
) -> list[SyntheticQuery]:
    """Questions naming people, places or projects with a time expression, each asked
    at a "now" inside the facts' span so relative expressions land on stored facts."""
    rng = random.Random(seed + 1)
    out: list[SyntheticQuery] = []
    for _ in range(count):
        reference = (start + timedelta(days=rng.uniform(30, days))).replace(tzinfo=UTC)
        if rng.random() < 0.5:
            when = rng.choice(RELATIVE)
        else:
            past = reference - timedelta(days=rng.uniform(0, 365))
            when = rng.choice((f"in {MONTHS[past.month - 1]} {past.year}", f"in {past.year}"))
        slots = {
            "a": _zipf(rng, vocab.people),
            "b": _zipf(rng, vocab.people),
            "city": _zipf(rng, vocab.cities, 0.9),
            "org": _zipf(rng, vocab.orgs),
            "project": _zipf(rng, vocab.projects),
            "when": when,
        }
        out.append(SyntheticQuery(rng.choice(QUESTIONS).format(**slots), reference))
    return out
