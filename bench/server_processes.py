"""Recall throughput with 1 and 2 (or more) server processes on one port.

Starts the whole stack the way `engram up` does (embedded PostgreSQL and Temporal, one
worker) in a scratch home, retains the first LoCoMo conversations once, then for each process
count restarts the stack with ENGRAM_API_PROCESSES=N and has C concurrent clients recall the
conversations' questions for a fixed time. Prints recalls/s and latency percentiles per count.

    .venv/bin/python -m bench.server_processes --processes 1,2 --clients 4 --seconds 30
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench.engram_api import EngramAPI, RetainItem
from bench.locomo_data import load_locomo, parse_selection
from engine.settings import Settings
from engram.supervisor import Stack

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo10.json"
BANK = "bench-processes"


@dataclass(frozen=True)
class Run:
    processes: int
    recalls: int
    errors: int
    seconds: float
    p50_ms: float
    p95_ms: float


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def settings_for(home: Path) -> Settings:
    os.environ.update(
        {
            "ENGRAM_HOME": str(home),
            "ENGRAM_API_PORT": str(free_port()),
            "ENGRAM_TEMPORAL_PORT": str(free_port()),
            "ENGRAM_TEMPORAL_UI_PORT": str(free_port()),
            "ENGRAM_WORKER_METRICS_PORT": str(free_port()),
            "ENGRAM_EXTRACTION_MODE": "local",
        }
    )
    return Settings.from_env()


async def fill(base: str, conversations: Sequence[int]) -> list[str]:
    data = load_locomo(DATA)
    questions: list[str] = []
    async with httpx.AsyncClient(base_url=base, timeout=600) as client:
        api = EngramAPI(client)
        await api.reset_bank(BANK)
        for number in conversations:
            conversation = data.conversations[number - 1]
            items = [
                RetainItem(turn.content, turn.timestamp, {"dia_id": turn.dia_id})
                for turn in conversation.turns
            ]
            await api.retain(BANK, conversation.sample_id, items, wait=True)
            questions += [q.question for q in conversation.questions]
        # Consolidation runs after the retain; measuring while it works would charge its CPU
        # to whichever process count came first.
        for _ in range(3000):
            state = (await client.get(f"/v1/default/banks/{BANK}/consolidation")).json()
            if state["pending_facts"] == 0 and state["operation_status"] == "completed":
                break
            await asyncio.sleep(0.2)
    return questions


async def hammer(base: str, questions: list[str], clients: int, seconds: float) -> Run:
    latencies: list[float] = []
    errors = 0
    deadline = time.monotonic() + seconds

    async def client_loop(offset: int) -> None:
        nonlocal errors
        index = offset
        async with httpx.AsyncClient(base_url=base, timeout=60) as client:
            while time.monotonic() < deadline:
                query = questions[index % len(questions)]
                index += clients
                started = time.perf_counter()
                response = await client.post(
                    f"/v1/default/banks/{BANK}/memories/recall",
                    json={"query": query, "budget": "mid"},
                )
                if response.status_code == 200:
                    latencies.append(time.perf_counter() - started)
                else:
                    errors += 1

    started = time.monotonic()
    await asyncio.gather(*(client_loop(i) for i in range(clients)))
    elapsed = time.monotonic() - started
    ordered = sorted(latencies) or [0.0]
    return Run(
        processes=0,
        recalls=len(latencies),
        errors=errors,
        seconds=elapsed,
        p50_ms=1000 * statistics.median(ordered),
        p95_ms=1000 * ordered[int(0.95 * (len(ordered) - 1))],
    )


def with_stack(home: Path, processes: int) -> Stack:
    os.environ["ENGRAM_API_PROCESSES"] = str(processes)
    stack = Stack(settings_for(home), lambda line: None)
    stack.start()
    return stack


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", default="1,2", help="process counts to compare")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--conversations", default="1-2", help="LoCoMo conversations to retain")
    parser.add_argument("--warmup", type=float, default=20.0, help="seconds of recall not counted")
    args = parser.parse_args(argv)
    counts = [int(part) for part in args.processes.split(",")]
    with tempfile.TemporaryDirectory(prefix="engram-processes-") as scratch:
        home = Path(scratch)
        home.chmod(0o755)
        runs: list[Run] = []
        # The bank is filled on a stack of its own and measured on fresh ones, so no count
        # pays for the retain's background work (consolidation, statistics) or gets a warmer
        # cache than another.
        stack = with_stack(home, 1)
        try:
            selection = parse_selection(args.conversations, 10)
            print(f"retaining LoCoMo conversations {args.conversations} ...", flush=True)
            base = f"http://127.0.0.1:{stack.settings.api_port}"
            questions = asyncio.run(fill(base, selection))
        finally:
            stack.stop()
        for count in counts:
            stack = with_stack(home, count)
            base = f"http://127.0.0.1:{stack.settings.api_port}"
            try:
                asyncio.run(hammer(base, questions, args.clients, args.warmup))
                alone = asyncio.run(hammer(base, questions, 1, args.seconds / 3))
                print(
                    f"{count} process(es), 1 client: p50 {alone.p50_ms:6.1f} ms, "
                    f"p95 {alone.p95_ms:6.1f} ms",
                    flush=True,
                )
                run = asyncio.run(hammer(base, questions, args.clients, args.seconds))
                runs.append(
                    Run(count, run.recalls, run.errors, run.seconds, run.p50_ms, run.p95_ms)
                )
                print(
                    f"{count} process(es): {run.recalls / run.seconds:6.1f} recalls/s, "
                    f"p50 {run.p50_ms:6.1f} ms, p95 {run.p95_ms:6.1f} ms, "
                    f"{run.errors} errors ({args.clients} clients, {run.seconds:.0f} s)",
                    flush=True,
                )
            finally:
                stack.stop()
        load = os.getloadavg()
        print(f"load average at the end: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
        if len(runs) > 1 and runs[0].recalls:
            ratio = (runs[-1].recalls / runs[-1].seconds) / (runs[0].recalls / runs[0].seconds)
            print(f"throughput {runs[-1].processes} vs {runs[0].processes} processes: {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
