"""Where the evidence recall missed sits, and what changes between two runs or two arrivals.

Reads the `--json` output of `bench/locomo_retrieval.py` (one or two files) and prints, for
each Engram system in them and each category, where every evidence turn landed in the
system's ranking: top 10, 11-20, 21-50, or not in the first 50 (the bench keeps 50). With
`--against` (another run's JSON, or a system name of the same file, e.g. the message
arrival of an `--arrival both` run), it also prints how many questions are ranked
differently at all and in their top 10, and per category the questions whose recall@10 went
up and down between the two, and the mean difference; `--list` names those questions.

    .venv/bin/python -m bench.locomo_misses out.json
    .venv/bin/python -m bench.locomo_misses out.json --system "engram, session documents" \
        --against "engram, message documents"
    .venv/bin/python -m bench.locomo_misses before.json --against after.json --list
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

CATEGORIES: Final = (1, 2, 3, 4, 5)
BANDS: Final = ("top 10", "11-20", "21-50", "not in 50")


@dataclass(frozen=True)
class Outcome:
    conversation: str
    category: int
    question: str
    gold: tuple[str, ...]
    ranked: tuple[str, ...]


def band(ranked: Sequence[str], dia_id: str) -> str:
    if dia_id not in ranked:
        return BANDS[3]
    position = ranked.index(dia_id) + 1
    return BANDS[0] if position <= 10 else BANDS[1] if position <= 20 else BANDS[2]


def recall_at_10(outcome: Outcome) -> float:
    top = set(outcome.ranked[:10])
    return sum(g in top for g in outcome.gold) / len(outcome.gold)


def outcomes_of(report: dict[str, Any], system: str) -> list[Outcome]:
    found = [
        Outcome(q["conversation"], q["category"], q["question"], tuple(q["gold"]), tuple(r[system]))
        for q in report["questions"]
        if system in (r := q["ranked"])
    ]
    if not found:
        raise ValueError(f"no system {system!r} in the report; it has {systems_of(report)}")
    return found


def systems_of(report: dict[str, Any]) -> list[str]:
    names = {s for q in report["questions"] for s in q["ranked"]}
    return sorted(s for s in names if s.startswith("engram"))


def bands_table(outcomes: Sequence[Outcome]) -> str:
    lines = ["| category | evidence | " + " | ".join(BANDS) + " | all in top 10 | none |"]
    lines.append("|---" * (len(BANDS) + 4) + "|")
    for category in CATEGORIES:
        picked = [o for o in outcomes if o.category == category]
        if not picked:
            continue
        counts = Counter(band(o.ranked, g) for o in picked for g in o.gold)
        total = sum(counts.values())
        every = sum(recall_at_10(o) == 1.0 for o in picked)
        none = sum(recall_at_10(o) == 0.0 for o in picked)
        cells = " | ".join(f"{counts[b]} ({counts[b] / total:.0%})" for b in BANDS)
        lines.append(
            f"| {category} | {total} | {cells} | {every}/{len(picked)} | {none}/{len(picked)} |"
        )
    return "\n".join(lines)


def _keyed(outcomes: Sequence[Outcome]) -> dict[tuple[str, str, int, int], Outcome]:
    """Each outcome by (conversation, question, category, occurrence): LoCoMo asks a few
    questions twice in one conversation."""
    seen: Counter[tuple[str, str, int]] = Counter()
    keyed: dict[tuple[str, str, int, int], Outcome] = {}
    for o in outcomes:
        key = (o.conversation, o.question, o.category)
        keyed[(*key, seen[key])] = o
        seen[key] += 1
    return keyed


def diff_table(before: Sequence[Outcome], after: Sequence[Outcome]) -> str:
    lines = [
        "| category | questions | up | down | mean recall@10 change |",
        "|---|---|---|---|---|",
    ]
    for category in CATEGORIES:
        matched = [(b, a) for b, a in _matched(before, after) if a.category == category]
        if not matched:
            continue
        changes = [recall_at_10(a) - recall_at_10(b) for b, a in matched]
        up = sum(c > 0 for c in changes)
        down = sum(c < 0 for c in changes)
        lines.append(
            f"| {category} | {len(matched)} | {up} | {down} | {sum(changes) / len(changes):+.3f} |"
        )
    return "\n".join(lines)


def _matched(before: Sequence[Outcome], after: Sequence[Outcome]) -> list[tuple[Outcome, Outcome]]:
    pairs = _keyed(before)
    return [(pairs[key], o) for key, o in _keyed(after).items() if key in pairs]


def ranking_changes(before: Sequence[Outcome], after: Sequence[Outcome]) -> str:
    """How many questions the two rank differently: anywhere in the 50, and in the top 10."""
    matched = _matched(before, after)
    anywhere = sum(b.ranked != a.ranked for b, a in matched)
    top = sum(b.ranked[:10] != a.ranked[:10] for b, a in matched)
    return f"ranked differently: {anywhere} of {len(matched)} questions ({top} in their top 10)"


def changed_questions(before: Sequence[Outcome], after: Sequence[Outcome]) -> str:
    """Each question whose recall@10 changed: category, before -> after, the question."""
    return "\n".join(
        f"  {b.category}  {recall_at_10(b):.2f} -> {recall_at_10(a):.2f}  {b.question}"
        for b, a in _matched(before, after)
        if recall_at_10(b) != recall_at_10(a)
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", type=Path, help="bench/locomo_retrieval.py --json output")
    parser.add_argument("--system", help="the Engram system to read (default: each)")
    parser.add_argument(
        "--against", help="another run's JSON file, or another system name of the same file"
    )
    parser.add_argument("--conversations", help='sample ids, comma-separated ("conv-26,...")')
    parser.add_argument(
        "--list", action="store_true", help="with --against: name the questions that changed"
    )
    args = parser.parse_args(argv)
    try:
        report = json.loads(args.report.read_text(encoding="utf-8"))
        systems = [args.system] if args.system else systems_of(report)
        chosen = set(args.conversations.split(",")) if args.conversations else None
        for system in systems:
            outcomes = [
                o for o in outcomes_of(report, system) if chosen is None or o.conversation in chosen
            ]
            print(f"\n{system}: where the evidence turns landed")
            print(bands_table(outcomes))
            if args.against is None:
                continue
            other_path = Path(args.against)
            if other_path.is_file():
                other = outcomes_of(json.loads(other_path.read_text(encoding="utf-8")), system)
            else:
                other = outcomes_of(report, args.against)
            other = [o for o in other if chosen is None or o.conversation in chosen]
            print(f"\n{system} -> {args.against}: {ranking_changes(outcomes, other)}")
            print("questions whose recall@10 changed:")
            print(diff_table(outcomes, other))
            if args.list:
                print(changed_questions(outcomes, other))
    except (OSError, ValueError, KeyError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
