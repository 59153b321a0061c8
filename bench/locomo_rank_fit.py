"""Fit the final score's weights on LoCoMo conversations 1-5; evaluate on 6-10 held out.

Two steps. `record` runs the recall engine in process over banks a LoCoMo run filled (the
banks of `bench/locomo_retrieval.py`, read straight from the stack's database) and keeps, for
every question, the reranked candidates' features: MaxSim of the fact alone and in its
context, the temporal arm's rank, the window proximity, whether the fact is a question, the
query's words in it, its embedding (for MMR) and its dia_ids. `fit` re-ranks those candidates
offline exactly as `RecallEngine._rank` does (scoring.combined_scores, MMR, the window first)
under a grid of the weights, so each setting costs seconds instead of a full run, and climbs
coordinate by coordinate (deterministic: fixed order, fixed steps) on the training
conversations, maximising recall@10 over categories 1-4 plus that of multi-hop. It prints the
weights found and the recall@10 table of the start and the end, training and held out.

    .venv/bin/python -m bench.locomo_rank_fit record --dsn "$DSN" --out cands.pkl
    .venv/bin/python -m bench.locomo_rank_fit fit cands.pkl

The DSN is the stack's (`engram up` prints its data directory; the password is in
`<ENGRAM_HOME>/postgres.password`, the socket in `<ENGRAM_HOME>/run`).
"""

from __future__ import annotations

import argparse
import asyncio
import pickle
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from bench.locomo_data import DEFAULT_DATA, load_locomo, parse_selection
from engine.db import create_pool
from engine.embedding import load_embedder
from engine.recall.config import RecallConfig
from engine.recall.engine import RecallEngine
from engine.recall.query import QueryVectors
from engine.recall.rerank import MaxSimReranker
from engine.recall.scoring import is_question, overlap, proximity, words
from engine.recall.token_cache import TokenVectorCache
from engine.recall.types import CandidateRow, Fused, Ranked, RecallRequest, TimeWindow
from engine.recall.window import placement

Record = dict[str, Any]
Vector = NDArray[np.float64]
TIER = {"inside": 0, "undated": 1, "outside": 2}
# The knobs fitted, their steps, and their bounds.
KNOBS: dict[str, tuple[float, float, float]] = {
    "context_weight": (0.1, 0.0, 1.0),
    "temporal_weight": (0.1, 0.0, 2.0),
    "question_penalty": (0.05, 0.0, 1.0),
    "temporal_rank_weight": (0.05, 0.0, 1.0),
    "term_overlap_weight": (0.05, 0.0, 1.0),
    "mmr_lambda": (0.033, 0.3, 1.0),
}


# An observation's evidence as dia_ids (the turns of the facts it was consolidated from).
EVIDENCE_DIA_IDS = """
SELECT e.observation_id::text AS observation_id,
       array_agg(DISTINCT f.metadata->>'dia_id') AS dia_ids
FROM observation_evidence e JOIN memory_units f ON f.id = e.fact_id
WHERE e.bank_id = $1 AND e.stance = 'supports' AND f.metadata ? 'dia_id'
GROUP BY e.observation_id
"""


class Recorder(RecallEngine):
    """The engine, keeping each query's reranked candidates on the side."""

    records: list[Record]

    def _rank(
        self,
        request: RecallRequest,
        vectors: QueryVectors,
        rows: list[CandidateRow],
        fused: list[Fused],
        reference: datetime,
        window: TimeWindow | None,
        asks_time: bool = False,
    ) -> Ranked:
        ranked = super()._rank(request, vectors, rows, fused, reference, window, asks_time)
        own = MaxSimReranker(vectors.tokens.shape[1], 0.0).score(
            request.query, vectors.tokens, rows
        )
        context = MaxSimReranker(vectors.tokens.shape[1], 1.0).score(
            request.query, vectors.tokens, rows
        )
        query_words = words(request.query)
        self.records.append(
            {
                "own": np.array(own),
                "ctx": np.array(context),
                "emb": np.stack([r.embedding for r in rows]).astype(np.float32),
                "dia": [str((r.metadata or {}).get("dia_id") or "") for r in rows],
                "ranks": [dict(f.ranks) for f in fused],
                "prox": np.array([proximity(r, window) if window else 0.0 for r in rows]),
                "haswin": window is not None,
                "tier": [placement(r, window) if window else "inside" for r in rows],
                "question": np.array([is_question(r.text) for r in rows], dtype=float),
                "overlap": np.array([overlap(query_words, r.text) for r in rows]),
                "ids": [r.id for r in rows],
                "observation": np.array([r.fact_type == "observation" for r in rows], dtype=float),
            }
        )
        self.more(self.records[-1], request, rows)
        return ranked

    def more(self, record: Record, request: RecallRequest, rows: list[CandidateRow]) -> None:
        """What a subclass keeps besides (bench/locomo_feedback.py)."""


async def record(args: argparse.Namespace) -> list[Record]:
    data = load_locomo(DEFAULT_DATA)
    chosen = parse_selection(args.conversations, len(data.conversations))
    embedder = load_embedder("minilm", None)
    pool = await create_pool(args.dsn, max_size=4)
    config = RecallConfig()
    engine = Recorder(
        pool,
        embedder,
        ThreadPoolExecutor(2),
        MaxSimReranker(embedder.dimension, config.context_weight),
        config,
        token_cache=TokenVectorCache(512 * 2**20),
    )
    engine.records = []
    out: list[Record] = []
    try:
        for n in chosen:
            conversation = data.conversations[n - 1]
            async with pool.acquire() as conn:
                evidence = {
                    r["observation_id"]: list(r["dia_ids"])
                    for r in await conn.fetch(
                        EVIDENCE_DIA_IDS, f"{args.prefix}{conversation.sample_id}"
                    )
                }
            for question in conversation.questions:
                request = RecallRequest(
                    bank_id=f"{args.prefix}{conversation.sample_id}",
                    query=question.question,
                    max_tokens=32768,
                    query_timestamp=conversation.query_time,
                )
                engine.records.clear()
                await engine.recall(request)
                kept: Record = engine.records[-1] if engine.records else {"empty": True}
                kept.update(conv=n, cat=question.category, gold=sorted(question.evidence))
                if "ids" in kept:
                    kept["evidence"] = [evidence.get(i, []) for i in kept["ids"]]
                out.append(kept)
            print(f"conversation {n}: {len(out)} questions", file=sys.stderr, flush=True)
    finally:
        await pool.close()
    return out


def _normalise(values: Vector) -> Vector:
    low, high = float(values.min()), float(values.max())
    return (values - low) / (high - low) if high > low else np.ones_like(values)


def dia_ids(value: str) -> list[str]:
    return [x for x in value.replace(";", ",").replace(" ", ",").split(",") if x]


def mmr(relevance: Vector, similarity: NDArray[np.float32], lam: float) -> list[int]:
    """engine/recall/mmr.py's order."""
    rel = _normalise(relevance)
    n = len(rel)
    chosen: list[int] = []
    remaining = np.ones(n, dtype=bool)
    max_sim = np.full(n, -np.inf)
    for _ in range(n):
        gain = lam * rel - (1 - lam) * np.where(np.isfinite(max_sim), max_sim, 0.0)
        gain[~remaining] = -np.inf
        pick = int(np.argmax(gain))
        chosen.append(pick)
        remaining[pick] = False
        max_sim = np.maximum(max_sim, similarity[pick])
    return chosen


def recall_at_10(r: Record, knobs: dict[str, float], k: int = 60) -> float:
    """One question re-ranked as the engine would with these knobs (English: the reranker's
    share is 1, no question asks for a time)."""
    cw = knobs["context_weight"]
    base = _normalise((1 - cw) * r["own"] + cw * r["ctx"])
    temporal = np.array(
        [k / (k + rk["temporal"]) if "temporal" in rk else 0.0 for rk in r["ranks"]]
    )
    final = (
        base
        + knobs["temporal_weight"] * r["prox"]
        - knobs["question_penalty"] * r["question"]
        + knobs["temporal_rank_weight"] * temporal
        + knobs["term_overlap_weight"] * r["overlap"]
    )
    by_final = sorted(range(len(final)), key=lambda i: (-final[i], i))
    embeddings = r["emb"][by_final]
    order = [
        by_final[j] for j in mmr(final[by_final], embeddings @ embeddings.T, knobs["mmr_lambda"])
    ]
    if r["haswin"]:
        order.sort(key=lambda i: TIER[r["tier"][i]])
    seen: dict[str, None] = {}
    for i in order:
        for dia_id in dia_ids(r["dia"][i]):
            seen.setdefault(dia_id)
        if len(seen) >= 10:
            break
    gold = set(r["gold"])
    return len(gold & set(list(seen)[:10])) / len(gold)


def table(records: Sequence[Record], knobs: dict[str, float], label: str) -> dict[str, float]:
    figures: dict[str, float] = {}
    for half, keep in (("train", lambda r: r["train"]), ("held out", lambda r: not r["train"])):
        chosen = [r for r in records if keep(r)]
        scores = [(r["cat"], recall_at_10(r, knobs)) for r in chosen]

        def mean(cats: set[int], values: list[tuple[int, float]] = scores) -> float:
            picked = [v for c, v in values if c in cats]
            return float(np.mean(picked)) if picked else float("nan")

        figures[f"{half} multi-hop"] = mean({1})
        figures[f"{half} overall"] = mean({1, 2, 3, 4})
        print(
            f"{label:>6} {half:>8}: multi-hop {mean({1}):.3f} temporal {mean({2}):.3f} "
            f"open-domain {mean({3}):.3f} single-hop {mean({4}):.3f} "
            f"overall 1-4 {mean({1, 2, 3, 4}):.3f} adversarial {mean({5}):.3f}"
        )
    return figures


def climb(
    records: Sequence[Record], start: dict[str, float], objective: Callable[[float, float], float]
) -> dict[str, float]:
    train = [r for r in records if r["train"] and r["cat"] in (1, 2, 3, 4)]

    def score(knobs: dict[str, float]) -> float:
        values = [(r["cat"], recall_at_10(r, knobs)) for r in train]
        overall = float(np.mean([v for _, v in values]))
        multi_hop = float(np.mean([v for c, v in values if c == 1]))
        return objective(overall, multi_hop)

    knobs, best = dict(start), score(start)
    for scale in (2.0, 1.0):
        improved = True
        while improved:
            improved = False
            for name, (step, low, high) in KNOBS.items():
                for sign in (1.0, -1.0):
                    trial = dict(knobs)
                    trial[name] = round(min(high, max(low, knobs[name] + sign * step * scale)), 4)
                    value = score(trial)
                    if value > best + 1e-4:
                        knobs, best, improved = trial, value, True
                        print(f"  {best:.4f} {name}={trial[name]}", file=sys.stderr, flush=True)
    return knobs


def fit(args: argparse.Namespace) -> None:
    train_set = set(parse_selection(args.train, 10))
    records = [r for r in pickle.loads(Path(args.candidates).read_bytes()) if not r.get("empty")]
    for r in records:
        r["train"] = r["conv"] in train_set
    defaults = RecallConfig()
    start = {name: float(getattr(defaults, name)) for name in KNOBS}
    if args.start_from_old:
        start = {**start, "context_weight": 0.4, "temporal_weight": 0.5, "question_penalty": 0.2}
        start = {**start, "temporal_rank_weight": 0.0, "term_overlap_weight": 0.0}
        start["mmr_lambda"] = 0.6
    print("start:", start)
    table(records, start, "start")
    found = climb(records, start, lambda overall, multi_hop: overall + args.multi_hop * multi_hop)
    print("found:", found)
    table(records, found, "found")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    steps = parser.add_subparsers(dest="step", required=True)
    rec = steps.add_parser("record", help="record every question's reranked candidates")
    rec.add_argument("--dsn", required=True, help="the database holding the LoCoMo banks")
    rec.add_argument("--prefix", default="locomo-", help="bank id = prefix + sample_id")
    rec.add_argument("--conversations", default="1-10")
    rec.add_argument("--out", type=Path, required=True)
    fitting = steps.add_parser("fit", help="climb the weights on the training conversations")
    fitting.add_argument("candidates", type=Path)
    fitting.add_argument("--train", default="1-5")
    fitting.add_argument("--multi-hop", type=float, default=1.0, help="objective's weight")
    fitting.add_argument(
        "--start-from-old", action="store_true", help="start from the weights before the fit"
    )
    args = parser.parse_args(argv)
    if args.step == "record":
        Path(args.out).write_bytes(pickle.dumps(asyncio.run(record(args))))
    else:
        fit(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
