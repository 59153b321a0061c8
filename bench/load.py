"""Load: N concurrent clients mixing recall, retain and list for a fixed time, over HTTP.

    .venv/bin/python -m bench.load                          # a stack already up on :8888
    .venv/bin/python -m bench.load --start                  # start `engram up` in a temp home
    .venv/bin/python -m bench.load --clients 8 --seconds 60 --mix recall=8,retain=1,list=1
    .venv/bin/python -m bench.load --clients 150 --seconds 20   # overload: expect 503s

Each client sends one request at a time, picking recall, retain or list at random by the
`--mix` weights, until `--seconds` have passed. Recall asks one of a few questions about the
bank; retain is a synchronous one-item retain (it waits for its workflow, so it measures the
whole write path); list reads a page of memories. The bank (`--bank`) is filled first with
`--facts` one-sentence items if it holds fewer facts. A 503 or 429 answer is counted, and its
client waits for the `Retry-After` it names before its next request, as a polite client
does; a request with no answer within `--timeout` counts as a timeout, which the server's
admission limit (ENGRAM_MAX_IN_FLIGHT) is there to prevent.

Printed: throughput, latency percentiles per operation (client-side wall time, successful
requests only), and every outcome by status ("timeout" and "error" for no answer).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import httpx

API: Final = "/v1/default/banks"
PEOPLE: Final = ("Nadia", "Omar", "Lena", "Kenji", "Maya", "Tomas", "Ines", "Arjun")
PLACES: Final = ("Lisbon", "Osaka", "Denver", "Nairobi", "Tallinn", "Cusco")
DOINGS: Final = (
    "adopted a cat",
    "started a pottery class",
    "ran a half marathon",
    "planted a lemon tree",
    "visited an old friend",
    "fixed a bicycle",
)
QUESTIONS: Final = (
    "What did Nadia do in Lisbon?",
    "Who started a pottery class?",
    "Where did Omar run a half marathon last year?",
    "What happened in Osaka in 2023?",
    "Which friend did Maya visit?",
)
START_TIMEOUT_S: Final = 180.0


def sentence(rng: random.Random) -> str:
    year = rng.choice((2022, 2023, 2024))
    return f"{rng.choice(PEOPLE)} {rng.choice(DOINGS)} in {rng.choice(PLACES)} in {year}."


@dataclass
class Tally:
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    outcomes: Counter[tuple[str, str]] = field(default_factory=Counter)
    retry_after_missing: int = 0

    def record(self, op: str, outcome: str, seconds: float) -> None:
        self.outcomes[(op, outcome)] += 1
        if outcome == "200":
            self.latencies[op].append(seconds)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def call(client: httpx.AsyncClient, op: str, bank: str, rng: random.Random) -> httpx.Response:
    if op == "recall":
        body = {"query": rng.choice(QUESTIONS), "budget": "mid", "max_tokens": 2048}
        return await client.post(f"{API}/{bank}/memories/recall", json=body)
    if op == "retain":
        items = [{"content": sentence(rng), "timestamp": "2024-06-01T10:00:00Z"}]
        return await client.post(f"{API}/{bank}/memories", json={"items": items})
    return await client.get(f"{API}/{bank}/memories/list", params={"limit": "50"})


async def client_loop(
    client: httpx.AsyncClient,
    bank: str,
    mix: dict[str, int],
    deadline: float,
    tally: Tally,
    seed: int,
) -> None:
    rng = random.Random(seed)
    ops, weights = list(mix), list(mix.values())
    while time.monotonic() < deadline:
        op = rng.choices(ops, weights)[0]
        started = time.monotonic()
        try:
            response = await call(client, op, bank, rng)
        except httpx.TimeoutException:
            tally.record(op, "timeout", time.monotonic() - started)
            continue
        except httpx.TransportError:
            tally.record(op, "error", time.monotonic() - started)
            await asyncio.sleep(0.5)
            continue
        tally.record(op, str(response.status_code), time.monotonic() - started)
        if response.status_code in (429, 503):
            retry_after = response.headers.get("retry-after")
            if retry_after is None:
                tally.retry_after_missing += 1
            await asyncio.sleep(float(retry_after or 1))


async def fill(client: httpx.AsyncClient, bank: str, facts: int) -> None:
    """At least `facts` memories in the bank, retained 50 items a request."""
    response = await client.get(f"{API}/{bank}/memories/list", params={"limit": "1"})
    have = response.json()["total"] if response.status_code == 200 else 0
    if have >= facts:
        print(f"bank {bank}: {have} memories already")
        return
    await client.put(f"{API}/{bank}", json={})
    rng = random.Random(7)
    started = time.monotonic()
    for offset in range(0, facts - have, 50):
        items = [
            {"content": sentence(rng), "timestamp": f"2024-0{1 + i % 9}-1{i % 9}T10:00:00Z"}
            for i in range(offset, min(offset + 50, facts - have))
        ]
        answer = await client.post(f"{API}/{bank}/memories", json={"items": items})
        answer.raise_for_status()
    response = await client.get(f"{API}/{bank}/memories/list", params={"limit": "1"})
    print(
        f"bank {bank}: filled to {response.json()['total']} in {time.monotonic() - started:.0f} s"
    )


def report(tally: Tally, seconds: float, clients: int) -> dict[str, Any]:
    total = sum(tally.outcomes.values())
    print(f"\n{clients} clients, {seconds:.0f} s, {total} requests, {total / seconds:.1f} req/s")
    summary: dict[str, Any] = {"clients": clients, "seconds": seconds, "requests": total}
    for op in sorted({op for op, _ in tally.outcomes}):
        ok = tally.latencies.get(op, [])
        line = f"  {op:7s} {len(ok) / seconds:6.1f} ok/s"
        stats: dict[str, Any] = {"ok_per_s": len(ok) / seconds}
        if ok:
            p50, p90, p99 = (percentile(ok, q) * 1000 for q in (0.5, 0.9, 0.99))
            line += f"  p50 {p50:6.0f} ms  p90 {p90:6.0f} ms  p99 {p99:6.0f} ms"
            stats.update(p50_ms=p50, p90_ms=p90, p99_ms=p99)
        outcomes = {o: n for (o_op, o), n in sorted(tally.outcomes.items()) if o_op == op}
        line += "  " + ", ".join(f"{o}: {n}" for o, n in outcomes.items())
        stats["outcomes"] = outcomes
        summary[op] = stats
        print(line)
    by_status: Counter[str] = Counter()
    for (_, outcome), n in tally.outcomes.items():
        if outcome != "200":
            by_status[outcome] += n
    print(f"  not 200, by status: {dict(by_status) or 'none'}")
    if tally.retry_after_missing:
        print(f"  503/429 without Retry-After: {tally.retry_after_missing}")
    summary["errors"] = dict(by_status)
    summary["retry_after_missing"] = tally.retry_after_missing
    return summary


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def started_stack(max_in_flight: int | None) -> Iterator[str]:
    """`engram up` in a temporary home on free ports; its URL while it runs."""
    with tempfile.TemporaryDirectory(prefix="engram-load-") as home:
        api = free_port()
        env = dict(os.environ)
        env.update(
            ENGRAM_HOME=home,
            ENGRAM_API_PORT=str(api),
            ENGRAM_TEMPORAL_PORT=str(free_port()),
            ENGRAM_TEMPORAL_UI_PORT=str(free_port()),
            ENGRAM_WORKER_METRICS_PORT=str(free_port()),
        )
        if max_in_flight is not None:
            env["ENGRAM_MAX_IN_FLIGHT"] = str(max_in_flight)
        engram = Path(sys.executable).parent / "engram"
        process = subprocess.Popen([str(engram), "up"], env=env, start_new_session=True)
        url = f"http://127.0.0.1:{api}"
        try:
            deadline = time.monotonic() + START_TIMEOUT_S
            while True:
                if process.poll() is not None:
                    raise SystemExit(f"engram up exited with {process.returncode}")
                try:
                    if httpx.get(f"{url}/ready", timeout=2).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise SystemExit("the stack did not become ready")
                time.sleep(0.5)
            yield url
        finally:
            os.killpg(process.pid, signal.SIGINT)
            process.wait(90)


def parse_mix(raw: str) -> dict[str, int]:
    mix = {}
    for part in raw.split(","):
        name, _, weight = part.partition("=")
        if name not in ("recall", "retain", "list"):
            raise SystemExit(f"--mix: unknown operation {name!r}")
        mix[name] = int(weight or 1)
    return mix


async def run(args: argparse.Namespace, url: str) -> dict[str, Any]:
    timeout = httpx.Timeout(args.timeout)
    limits = httpx.Limits(max_connections=args.clients, max_keepalive_connections=args.clients)
    async with httpx.AsyncClient(base_url=url, timeout=timeout, limits=limits) as client:
        (await client.get("/ready")).raise_for_status()
        await fill(client, args.bank, args.facts)
        tally = Tally()
        started = time.monotonic()
        deadline = started + args.seconds
        mix = parse_mix(args.mix)
        await asyncio.gather(
            *(
                client_loop(client, args.bank, mix, deadline, tally, seed)
                for seed in range(args.clients)
            )
        )
        return report(tally, time.monotonic() - started, args.clients)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="http://127.0.0.1:8888")
    parser.add_argument("--start", action="store_true", help="start `engram up` in a temp home")
    parser.add_argument("--max-in-flight", type=int, help="ENGRAM_MAX_IN_FLIGHT for --start")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--mix", default="recall=8,retain=1,list=1")
    parser.add_argument("--bank", default="load-bench")
    parser.add_argument("--facts", type=int, default=300)
    parser.add_argument("--timeout", type=float, default=30.0, help="per request, seconds")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    if args.start:
        with started_stack(args.max_in_flight) as url:
            summary = asyncio.run(run(args, url))
    else:
        summary = asyncio.run(run(args, args.url))
    if args.json is not None:
        args.json.write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
