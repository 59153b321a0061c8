"""Dump what the local extractor makes of every LoCoMo turn, to compare two checkouts.

    .venv/bin/python -m bench.extraction_dump out.json [--data PATH]

Writes the fact texts, in turn order, as JSON and prints their count and the extractor's
time per turn (process CPU, after the first turn has loaded the dictionaries). Run it in two
checkouts and compare: `--against` the other checkout's file prints how many texts differ and
each pair; none shows that a change to the extractor (dates, sentence splitting, Chinese
paths) left English extraction exactly as it was.

    .venv/bin/python -m bench.extraction_dump after.json --against before.json
"""

from __future__ import annotations

import argparse
import json
import time
from datetime import datetime
from pathlib import Path

from engine.extraction.local import LocalExtractor
from engine.types import ItemContext

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo10.json"
SESSION_TIME = "%I:%M %p %d %B, %Y"  # LoCoMo's "1:56 pm on 8 May, 2023" without " on"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--against", type=Path, help="another checkout's output to compare")
    args = parser.parse_args()
    extractor = LocalExtractor()
    texts: list[str] = []
    turns_seen = 0
    cpu = 0.0
    for record in json.loads(args.data.read_text()):
        conversation = record["conversation"]
        for key in sorted(conversation):
            turns = conversation[key]
            if not key.startswith("session_") or not isinstance(turns, list):
                continue
            said = conversation[f"{key}_date_time"].replace(" on ", " ")
            when = datetime.strptime(said, SESSION_TIME).astimezone()
            for turn in turns:
                item = ItemContext(mentioned_at=when)
                started = time.process_time()
                facts = extractor.extract(f"{turn['speaker']}: {turn['text']}", item)
                if turns_seen:
                    cpu += time.process_time() - started
                turns_seen += 1
                texts += [f.text for f in facts]
    args.out.write_text(json.dumps(texts, ensure_ascii=False))
    print(len(texts))
    per_turn_ms = 1000 * cpu / max(1, turns_seen - 1)
    print(f"{turns_seen} turns, local extraction {per_turn_ms:.2f} ms CPU per turn")
    if args.against is not None:
        other: list[str] = json.loads(args.against.read_text())
        pairs = [(a, b) for a, b in zip(other, texts, strict=False) if a != b]
        print(f"against {args.against}: {len(other)} texts there, {len(pairs)} of them differ")
        for before, after in pairs:
            print(f"  - {before}\n  + {after}")


if __name__ == "__main__":
    main()
