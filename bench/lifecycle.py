"""A deterministic 6-month assistant's memory, with and without the scheduled lifecycle.

    .venv/bin/python -m bench.lifecycle --url http://127.0.0.1:8888 [--days 182] [--json out]

Against a running Engram (public API only). Two banks receive the same generated stream, one
message a turn, stored as said (extraction mode `none`, so every message is one fact and the
run does not depend on the extractor): per day three small-talk lines, one ordinary event,
and every 14 days a change of a standing fact — where the user lives, where they work, how
they want answers (short ↔ every step in detail) — plus ten important facts in the first
ten days (allergy, daughter's name, ...). The "forgetting" bank runs the lifecycle weekly
with "now" injected as the simulated day (decay is by elapsed days, so a weekly run decays as
seven daily ones); the other never runs it. Printed: active facts per month in each bank,
recall latency (p50/p95 over the questions), recall@10 on questions about current facts (the
latest value of each standing fact, the ten important facts) and on history questions asked
with `as_of` (the value that held in the middle of each 14-day interval).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

# The simulated days start tomorrow: decay counts from when a memory entered the bank (stored,
# or said if later), so days before the moment the bench stores them would not decay at all.
START = datetime.now(UTC).replace(hour=9, minute=0, second=0, microsecond=0) + timedelta(days=1)
CHANGE_EVERY = 14
CITIES = ["Lisbon", "Porto", "Madrid", "Berlin", "Vienna", "Oslo", "Dublin", "Prague"]
EMPLOYERS = ["Acme", "Globex", "Initech", "Umbrella", "Hooli", "Stark", "Wayne", "Cyberdyne"]
STYLES = ["Keep your answers short.", "Give me every step in detail."]
SMALL_TALK = [
    "The weather is nice today, haha.",
    "Ok, cool, thanks.",
    "Lol that is funny.",
    "Not much going on, just chatting.",
    "Sounds good, see you later.",
    "Nice, great.",
]
EVENTS = [
    "went for a walk",
    "cooked pasta",
    "read a novel",
    "watched a film",
    "fixed a bike",
    "called a friend",
    "cleaned the flat",
    "baked bread",
    "went swimming",
    "played chess",
]
IMPORTANT = [
    ("The user is allergic to peanuts.", "What is the user allergic to?"),
    ("The user's daughter is named Ines.", "What is the name of the user's daughter?"),
    ("The user's birthday is on 12 June.", "When is the user's birthday?"),
    ("The user prefers metric units.", "Which units does the user prefer?"),
    ("The user decided to run a marathon in October.", "Which race does the user plan?"),
    ("The user is vegetarian.", "What does the user not eat?"),
    ("The user's passport expires in 2027.", "When does the user's passport expire?"),
    ("The user plays the cello in an orchestra.", "Which instrument does the user play?"),
    ("The user's doctor is Dr. Almeida.", "Who is the user's doctor?"),
    ("The user promised to visit grandmother every Sunday.", "What did the user promise?"),
]


@dataclass
class Stream:
    days: list[list[str]] = field(default_factory=list)
    # (question, expected text, as_of or None)
    current: list[tuple[str, str, datetime | None]] = field(default_factory=list)
    history: list[tuple[str, str, datetime | None]] = field(default_factory=list)


def standing(kind: str, k: int) -> str:
    if kind == "city":
        return f"The user lives in {CITIES[k % len(CITIES)]} now."
    if kind == "job":
        return f"The user works at {EMPLOYERS[k % len(EMPLOYERS)]} now."
    return STYLES[k % 2]


QUESTIONS = {
    "city": "Where does the user live?",
    "job": "Where does the user work?",
    "style": "How should answers be written?",
}


def generate(days: int) -> Stream:
    stream = Stream()
    changes = 0
    for day in range(days):
        messages = [SMALL_TALK[(day * 3 + i) % len(SMALL_TALK)] for i in range(3)]
        messages.append(f"On day {day + 1} the user {EVENTS[day % len(EVENTS)]}.")
        if day < len(IMPORTANT):
            messages.append(IMPORTANT[day][0])
        if day % CHANGE_EVERY == 0:
            for kind in QUESTIONS:
                messages.append(standing(kind, changes))
            changes += 1
        stream.days.append(messages)
    for kind, question in QUESTIONS.items():
        stream.current.append((question, standing(kind, changes - 1), None))
        for k in range(changes - 1):
            middle = START + timedelta(days=k * CHANGE_EVERY + CHANGE_EVERY // 2)
            stream.history.append((question, standing(kind, k), middle))
    stream.current += [(q, text, None) for text, q in IMPORTANT]
    return stream


def post(client: httpx.Client, path: str, body: dict[str, Any]) -> Any:
    response = client.post(path, json=body)
    response.raise_for_status()
    return response.json()


def active_facts(client: httpx.Client, bank: str) -> int:
    response = client.get(
        f"/v1/default/banks/{bank}/memories/list", params={"state": "valid", "limit": 1}
    )
    response.raise_for_status()
    return int(response.json()["total"])


def evaluate(
    client: httpx.Client,
    bank: str,
    questions: list[tuple[str, str, datetime | None]],
    now: datetime,
) -> tuple[float, list[float]]:
    hits, latencies = 0, []
    for question, expected, as_of in questions:
        body: dict[str, Any] = {
            "query": question,
            "budget": "mid",
            "max_tokens": 4096,
            "query_timestamp": now.isoformat(),
        }
        if as_of is not None:
            body["as_of"] = as_of.isoformat()
        started = time.perf_counter()
        answer = post(client, f"/v1/default/banks/{bank}/memories/recall", body)
        latencies.append((time.perf_counter() - started) * 1000)
        top = [r["text"] for r in answer["results"][:10]]
        hits += expected in top
    return hits / max(len(questions), 1), latencies


def run(url: str, days: int, prefix: str) -> dict[str, Any]:
    stream = generate(days)
    banks = {"forgetting": f"{prefix}forgetting", "keeping": f"{prefix}keeping"}
    sizes: dict[str, list[int]] = {name: [] for name in banks}
    counts: dict[str, int] = {"decayed": 0, "archived": 0, "merged": 0, "deleted": 0}
    with httpx.Client(base_url=url, timeout=600) as client:
        for bank in banks.values():
            client.delete(f"/v1/default/banks/{bank}")
            client.put(
                f"/v1/default/banks/{bank}",
                json={"extraction_mode": "none", "enable_observations": False},
            ).raise_for_status()
        started = time.perf_counter()
        for day, messages in enumerate(stream.days):
            when = START + timedelta(days=day)
            items = [
                {"content": m, "timestamp": (when + timedelta(minutes=i)).isoformat()}
                for i, m in enumerate(messages)
            ]
            for bank in banks.values():
                post(client, f"/v1/default/banks/{bank}/memories", {"items": items})
            if day % 7 == 6:
                result = post(
                    client,
                    f"/v1/default/banks/{banks['forgetting']}/lifecycle/run",
                    {"now": (when + timedelta(hours=12)).isoformat()},
                )
                for key in counts:
                    counts[key] += result["counts"][key]
            if day % 30 == 29 or day == days - 1:
                for name, bank in banks.items():
                    sizes[name].append(active_facts(client, bank))
        ingest_s = time.perf_counter() - started
        end = START + timedelta(days=days)
        results: dict[str, Any] = {}
        for name, bank in banks.items():
            current, lat_c = evaluate(client, bank, stream.current, end)
            history, lat_h = evaluate(client, bank, stream.history, end)
            latencies = sorted(lat_c + lat_h)
            results[name] = {
                "active_facts_by_month": sizes[name],
                "recall@10_current": round(current, 3),
                "recall@10_as_of": round(history, 3),
                "latency_ms_p50": round(statistics.median(latencies), 1),
                "latency_ms_p95": round(latencies[int(0.95 * (len(latencies) - 1))], 1),
            }
    return {
        "days": days,
        "messages": sum(len(d) for d in stream.days),
        "questions": {"current": len(stream.current), "as_of": len(stream.history)},
        "lifecycle_totals": counts,
        "ingest_and_lifecycle_s": round(ingest_s, 1),
        "banks": results,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8888")
    parser.add_argument("--days", type=int, default=182)
    parser.add_argument("--bank-prefix", default="lifecycle-bench-")
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()
    figures = run(args.url, args.days, args.bank_prefix)
    print(
        f"{figures['days']} days, {figures['messages']} messages; "
        f"questions: {figures['questions']}; lifecycle totals {figures['lifecycle_totals']}"
    )
    for name, data in figures["banks"].items():
        print(f"{name:>10}: active facts by month {data['active_facts_by_month']}")
        print(
            f"{'':>10}  recall@10 current {data['recall@10_current']:.3f}, "
            f"as_of {data['recall@10_as_of']:.3f}; recall p50 {data['latency_ms_p50']} ms, "
            f"p95 {data['latency_ms_p95']} ms"
        )
    if args.json:
        with open(args.json, "w") as out:
            json.dump(figures, out, indent=2)


if __name__ == "__main__":
    main()
