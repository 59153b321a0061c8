"""The recall tests' corpus (facts that each arm is the one to find, plus distractors) and
an app over the recall tests' database."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from starlette.applications import Starlette
from temporalio.testing import WorkflowEnvironment

from engine.db import Pool
from engine.embedding import Embedder
from engine.settings import Settings
from server.app import create_app
from server.services import Services

BASE = "/v1/default/banks"
# Questions the graph-cache and temporal-arm tests ask of every test bank.
QUERIES = (
    "Was Alice affected by recent issues?",
    "What did Sam buy at the market?",
    "Where does Ivo work?",
    "Priya visited a museum",
)
NOW = "2024-06-15T12:00:00+00:00"
# fmt: off
DISTRACTOR_NAMES = (
    "Marta", "Bram", "Celia", "Dario", "Elena", "Fabio", "Greta", "Hugo", "Irene", "Jonas",
    "Kira", "Lars", "Mira", "Nico", "Olga", "Pavel", "Rosa", "Sven", "Tara", "Umberto", "Vera",
    "Walter", "Xenia", "Yuri", "Zora", "Anton", "Bianca", "Carlo", "Delia", "Emil", "Flora",
    "Gustav", "Hanna", "Igor", "Jana", "Karel", "Lena", "Milan", "Nadia", "Oskar",
)
JOBS = (
    "baker", "plumber", "nurse", "pilot", "chef", "dentist", "lawyer", "farmer", "tailor",
    "potter", "welder", "barber", "teacher", "miner", "sailor", "painter",
)
# fmt: on


def corpus() -> list[dict[str, Any]]:
    """Facts that each arm is the one to find, plus distractors."""
    items: list[dict[str, Any]] = [
        {"content": "The warehouse access code is ZX-4471.", "document_id": "code"},
        {"content": "Dana adopted a kitten from the animal shelter.", "document_id": "dana"},
        {"content": "Zelda's brother is named Ivo.", "document_id": "zelda"},
        {"content": "Ivo works as a lighthouse keeper in Porto.", "document_id": "ivo"},
        {
            "content": "Priya visited the botanical garden.",
            "document_id": "priya-june",
            "timestamp": "2024-06-10T10:00:00Z",
        },
        {
            "content": "Priya visited the science museum.",
            "document_id": "priya-march",
            "timestamp": "2024-03-02T10:00:00Z",
        },
        {
            "content": "Priya visited the city aquarium.",
            "document_id": "priya-nov",
            "timestamp": "2023-11-20T10:00:00Z",
        },
        {
            "content": "The orchid greenhouse opens at dawn.",
            "document_id": "tag-alpha",
            "tags": ["alpha"],
            "metadata": {"source": "notes", "page": "12"},
        },
        {
            "content": "The orchid greenhouse closes at dusk.",
            "document_id": "tag-beta",
            "tags": ["beta"],
        },
        {
            "content": "The orchid greenhouse sells rare orchid seeds.",
            "document_id": "tag-both",
            "tags": ["alpha", "beta"],
        },
        {"content": "The orchid greenhouse has a koi pond.", "document_id": "tag-none"},
    ]
    for n, name in enumerate(DISTRACTOR_NAMES):
        job = JOBS[n % len(JOBS)]
        items.append(
            {"content": f"{name}'s brother earns a living as a {job}.", "document_id": f"d{n}"}
        )
    for item in items:
        item.setdefault("timestamp", "2024-01-05T09:00:00Z")
    return items


CJK_ITEMS = [
    {"content": "王芳在上海开了一家咖啡店。", "document_id": "wang"},
    {"content": "李雷在北京学习钢琴。", "document_id": "li"},
    {"content": "Hans collects vintage postcards from Vienna.", "document_id": "hans"},
]


# Multi-hop (engine/recall/graph.py): the query names Alice; only a walk Alice -> Project
# Atlas -> the cluster reaches the outage, which shares no word with the question. The facts
# are weeks apart, so no temporal link joins them. Sam writes the journal and is on thirty
# market facts: a popular entity the walk must not spread through.
DEPTH_CHAIN = (
    ("depth-lead", "2024-03-04", "Alice is the tech lead on Project Atlas."),
    ("depth-runs", "2024-04-16", "Atlas runs on our Kubernetes cluster."),
    ("depth-outage", "2024-06-11", "The cluster had an outage on Tuesday."),
    ("depth-sister", "2024-02-10", "Sam's sister Wren plays the violin."),
    ("depth-concert", "2024-05-20", "Wren gave a concert at the Vienna State Opera."),
)
DEPTH_DISTRACTORS = (
    "Bob is the product manager for Project Hermes.",
    "Hermes keeps its data in a Postgres database.",
    "Carol fixed a bug in the billing page.",
    "Alice enjoys hiking in the mountains on weekends.",
    "The coffee machine in the kitchen broke on Monday.",
    "Dave had a flat tire on his way to work.",
    "Erin's laptop battery drains too quickly.",
    "The team retrospective listed slow code reviews as a problem.",
    "Frank caught a cold after the conference.",
    "The printer on the third floor ran out of toner.",
)
# fmt: off
SAM_THINGS = (
    "apples", "a kite", "new boots", "a lamp", "fresh bread", "a chess set", "paint",
    "a rug", "coffee beans", "a bicycle bell", "seeds", "a teapot", "socks", "a map",
    "candles", "a notebook", "honey", "a hammer", "tulips", "a scarf", "olive oil",
    "a puzzle", "rice", "a mirror", "stamps", "a blanket", "cheese", "a clock", "glue",
    "a basket",
)
# fmt: on


def depth_items() -> list[dict[str, Any]]:
    """One fact per item, spread over the first half of 2024."""
    items = [
        {"content": text, "document_id": doc, "timestamp": f"{day}T09:00:00Z"}
        for doc, day, text in DEPTH_CHAIN
    ]
    items += [
        {
            "content": text,
            "document_id": f"depth-d{n}",
            "timestamp": f"2024-{1 + n % 6:02d}-{2 + 2 * n:02d}T09:00:00Z",
        }
        for n, text in enumerate(DEPTH_DISTRACTORS)
    ]
    items += [
        {
            "content": f"Sam bought {thing} at the market.",
            "document_id": f"depth-sam{n}",
            "timestamp": f"2024-{1 + n // 6:02d}-{1 + 4 * (n % 6):02d}T09:00:00Z",
        }
        for n, thing in enumerate(SAM_THINGS)
    ]
    return items


OBSERVED_ITEMS = [
    {"content": "Noor swims in the lake every morning.", "document_id": "swim"},
    {"content": "Noor ran a half marathon in Lisbon.", "document_id": "run"},
]


# Alice's activities in four months of 2024: an explicit window must put March and April first
# for "last spring" asked in January 2025, whatever the reranker prefers (the December fact
# shares the question's words).
WINDOW_ITEMS = [
    {
        "content": "Alice took a pottery class on Saturdays.",
        "document_id": "alice-march",
        "timestamp": "2024-03-16T10:00:00Z",
    },
    {
        "content": "Alice ran a half marathon by the river.",
        "document_id": "alice-april",
        "timestamp": "2024-04-21T10:00:00Z",
    },
    {
        "content": "Alice went hiking in the mountains.",
        "document_id": "alice-october",
        "timestamp": "2024-10-12T10:00:00Z",
    },
    {
        "content": "What Alice did in her free time was volunteer at the food bank.",
        "document_id": "alice-december",
        "timestamp": "2024-12-14T10:00:00Z",
    },
]


# Two conversations told at the same moment: each turn's answer is in the next turn, which
# only the reranker's context joins to it. Retained once as one document per conversation and
# once as one document per message, they must rank alike (engine/recall/context.py).
_THREADS = {
    "wed": [
        "Maya: How long have you and Tom been married?",
        "Lina: Seven years already, and every one of them a joy!",
        "Maya: Did you two go anywhere for the anniversary?",
        "Lina: We spent a week sailing around the Azores.",
    ],
    "job": [
        "Omar: Which city did the new job take you to?",
        "Rita: Rotterdam, right by the old harbour.",
    ],
}


def thread_items(per_message: bool) -> list[dict[str, Any]]:
    """The two conversations, every turn at 18:00 on 2 May 2024, as one document per
    conversation or one per message (ids that sort in message order)."""
    return [
        {
            "content": text,
            "timestamp": "2024-05-02T18:00:00Z",
            "metadata": {"conversation": thread},
            "document_id": f"{thread}-{n}" if per_message else thread,
        }
        for thread, turns in _THREADS.items()
        for n, text in enumerate(turns)
    ]


@dataclass(frozen=True)
class Banks:
    main: str
    cjk: str
    observed: str  # facts an observation is added to by the test that needs one
    window: str  # WINDOW_ITEMS
    by_conversation: str  # thread_items(per_message=False)
    by_message: str  # thread_items(per_message=True)
    depth: str  # depth_items(): multi-hop chains and a popular entity
    ids: dict[str, str]  # document id -> the id of its (only) fact


def recall_app(
    home: Path,
    pool: Pool,
    temporal: WorkflowEnvironment,
    embedder: Embedder,
    cpu: ThreadPoolExecutor,
) -> Starlette:
    queue = f"tq-recall-{uuid.uuid4()}"
    settings = Settings(home=home, database_url="", task_queue=queue)
    application = create_app(_never)
    application.state.services = Services(settings, pool, temporal.client, embedder, cpu)
    return application


# Facts for the migration tests: a bank written in an older storage format, converted, must
# still answer "Which pet did Dana adopt?" with the first one.
OLD_FORMAT_FACTS = (
    "Dana adopted a kitten from the animal shelter.",
    "The warehouse access code is ZX-4471.",
    "Ivo works as a lighthouse keeper in Porto.",
    "Priya visited the botanical garden in June.",
)
OLD_FORMAT_QUERY = "Which pet did Dana adopt?"


async def traced_recall(application: Starlette, bank: str, query: str) -> dict[str, Any]:
    """One recall with its trace through the app, in process; fails on any status but 200."""
    transport = httpx.ASGITransport(app=application)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        response = await client.post(
            f"{BASE}/{bank}/memories/recall", json={"query": query, "trace": True}
        )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _never() -> Any:
    raise AssertionError("the lifespan does not run under ASGITransport")
