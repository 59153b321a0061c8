"""Every recall's answer written out, so two commits can be compared recall by recall.

Runs the recall engine in process over bench/recall_latency.py's bank (held in memory and its
token vectors warmed, as the server does) on its synthetic queries, and writes per recall the
returned facts in order with the `repr` of their final, reranker, semantic and fused scores,
then every arm's hits with theirs. Run it from two worktrees on the same database and
compare the files with `--against`: it prints how many recalls returned the same facts in the
same order, how many also every score, and the same per arm.

    .venv/bin/python -m bench.recall_dump --data-dir /work/copy-100k --out /tmp/branch.txt
    .venv/bin/python -m bench.recall_dump --compare /tmp/main.txt --against /tmp/branch.txt
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC
from pathlib import Path

for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

from bench.in_process import bench_database  # noqa: E402
from bench.recall_latency import BANK, DAYS, SEED, START  # noqa: E402
from bench.synthetic_facts import generate_facts, generate_queries  # noqa: E402
from engine.db import create_pool  # noqa: E402
from engine.embedding import load_embedder  # noqa: E402
from engine.recall.engine import RecallEngine  # noqa: E402
from engine.recall.types import Budget, RecallRequest, RecallResult  # noqa: E402
from engine.settings import Settings  # noqa: E402
from server.services import CPU_THREADS  # noqa: E402


def lines_of(result: RecallResult) -> list[str]:
    out = []
    for m in result.memories:
        s = m.scores
        out.append(f"M {m.row.id} {s.final!r} {s.reranker!r} {s.semantic!r} {s.fused!r}")
    for arm in result.arms:
        out.append(f"A {arm.arm} " + " ".join(f"{h.unit_id}:{h.score!r}" for h in arm.hits))
    return out


async def dump(args: argparse.Namespace, database_url: str) -> None:
    pool = await create_pool(database_url, max_size=10)
    cpu = ThreadPoolExecutor(CPU_THREADS, thread_name_prefix="dump-cpu")
    settings = Settings(home=Path("/nonexistent"), database_url=database_url)
    engine = RecallEngine.from_settings(
        settings, pool, load_embedder("minilm"), cpu, graph_cache=True
    )
    try:
        if engine.graph_cache is not None and await engine.graph_cache.read(BANK) is not None:
            await engine.warm(BANK)
        _, vocab = generate_facts(args.facts, seed=SEED, start=START, days=DAYS)
        seed = SEED + args.query_seed
        queries = generate_queries(args.queries, vocab, seed=seed, start=START, days=DAYS)
        budgets: list[Budget] = args.budgets
        written: list[str] = []
        for n, query in enumerate(queries):
            for budget in budgets:
                request = RecallRequest(
                    BANK, query.text, budget=budget, query_timestamp=query.reference.astimezone(UTC)
                )
                result = await engine.recall(request)
                written += [f"## {n} {budget} {query.text!r}", *lines_of(result)]
        args.out.write_text("\n".join(written) + "\n")
    finally:
        await engine.close()
        cpu.shutdown(wait=False, cancel_futures=True)
        await pool.close()


@dataclass
class Answer:
    memories: list[str] = field(default_factory=list)
    arms: dict[str, list[str]] = field(default_factory=dict)


def read(path: Path) -> dict[str, Answer]:
    answers: dict[str, Answer] = {}
    current = Answer()
    for line in path.read_text().splitlines():
        if line.startswith("## "):
            current = answers.setdefault(line, Answer())
        elif line.startswith("M "):
            current.memories.append(line)
        elif line.startswith("A "):
            _, arm, *hits = line.split(" ")
            current.arms[arm] = hits
    return answers


def ids(lines: list[str], at: int) -> list[str]:
    return [line.split(" ")[at].split(":")[0] for line in lines]


def compare(first: Path, second: Path) -> int:
    """Prints what differs; 1 when any recall returned other facts or another order."""
    a, b = read(first), read(second)
    same_facts = same_scores = 0
    arms: dict[str, list[int]] = {}
    for key, answer in a.items():
        other = b.get(key, Answer())
        if ids(answer.memories, 1) == ids(other.memories, 1):
            same_facts += 1
        else:
            print(f"differs: {key}")
        same_scores += answer.memories == other.memories
        for arm, hits in answer.arms.items():
            theirs = other.arms.get(arm, [])
            counts = arms.setdefault(arm, [0, 0])
            counts[0] += ids(hits, 0) == ids(theirs, 0)
            counts[1] += hits == theirs
    print(
        f"{len(a)} recalls ({len(b)} in the second file): the same facts in the same order "
        f"{same_facts}, and every returned score too {same_scores}"
    )
    for arm, (same, exact) in arms.items():
        print(f"  {arm}: the same hits in the same order {same}, with the same scores {exact}")
    return 0 if same_facts == len(a) == len(b) else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--facts", type=int, default=100_000, help="the bank's planned size")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument(
        "--query-seed",
        type=int,
        default=1,
        help="added to the bank's seed for the queries: 1 as recall_profile, 2 as the compares",
    )
    parser.add_argument(
        "--budgets", nargs="+", choices=("low", "mid", "high"), default=["mid", "high"]
    )
    parser.add_argument("--database-url", default="")
    parser.add_argument("--data-dir", default="", help="an embedded PostgreSQL to start")
    parser.add_argument("--out", type=Path, help="write the recalls' answers here")
    parser.add_argument("--compare", type=Path, help="a file written by --out")
    parser.add_argument("--against", type=Path, help="another one, to compare with it")
    args = parser.parse_args()
    if args.compare is not None and args.against is not None:
        return compare(args.compare, args.against)
    if args.out is None or not (args.database_url or args.data_dir):
        parser.error("give --out and --database-url or --data-dir, or --compare and --against")
    with bench_database(args.database_url, args.data_dir, "recall_latency") as database_url:
        asyncio.run(dump(args, database_url))
    return 0


if __name__ == "__main__":
    sys.exit(main())
