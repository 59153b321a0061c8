"""`engram retain`, `recall` and `reflect`: a bank's memory from the shell."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, TextIO

from engram.cli_support import UsageError, bank, command, day, read_stdin, read_text, table
from engram.client import EngramClient

EPILOG_RETAIN = """examples:
  engram retain --bank alice "Alice moved to Lisbon in March 2024."
  engram retain --bank alice --file meeting-notes.md --document-id meeting-2024-05-02
  pbpaste | engram retain --bank alice --timestamp 2024-05-02T10:00:00Z
"""
EPILOG_RECALL = """examples:
  engram recall --bank alice "where does Alice live?"
  engram recall --bank alice "trips last year" --budget high --type experience
  engram recall --bank alice "dogs" --json | jq '.results[0]'
"""
EPILOG_REFLECT = """examples:
  engram reflect --bank alice "how has Alice's Python changed this year?"
  engram reflect --bank alice "what should I get Alice for her birthday?" --budget high
  engram reflect --bank alice "is Alice comfortable with async?" --json | jq '.based_on'

Without an LLM key (ENGRAM_LLM_API_KEY) the answer lists the evidence instead.
"""


def add_retain_command(commands: Any, banked: argparse.ArgumentParser) -> None:
    retain = command(commands, "retain", "turn text into memories", EPILOG_RETAIN, [banked])
    retain.add_argument("text", nargs="?", metavar="TEXT", help="the text ('-' or none: stdin)")
    retain.add_argument("--file", "-f", type=Path, help="read the text from this file")
    retain.add_argument("--document-id", help="update this document instead of adding one")
    retain.add_argument("--timestamp", help="when it was said (ISO-8601; default now)")
    retain.add_argument("--context", help="what the text is (e.g. 'team meeting')")
    retain.add_argument("--tag", action="append", default=[], help="a tag (repeatable)")


def add_recall_commands(commands: Any, banked: argparse.ArgumentParser) -> None:
    """Register `recall` and `reflect`."""
    recall = command(commands, "recall", "find memories for a question", EPILOG_RECALL, [banked])
    recall.add_argument("query", metavar="QUERY")
    recall.add_argument("--budget", choices=("low", "mid", "high"), default="mid")
    recall.add_argument("--max-tokens", type=int, default=4096)
    recall.add_argument(
        "--type",
        action="append",
        choices=("world", "experience", "observation"),
        help="only this fact type (repeatable)",
    )
    recall.add_argument("--limit", type=int, default=20, help="rows to show (default 20)")
    recall.add_argument("--json", action="store_true", help="print the API's JSON answer")

    reflect = command(
        commands,
        "reflect",
        "answer a question by reasoning over memories",
        EPILOG_REFLECT,
        [banked],
    )
    reflect.add_argument("query", metavar="QUERY")
    reflect.add_argument("--budget", choices=("low", "mid", "high"), default="mid")
    reflect.add_argument("--context", help="what the question is about, for the model")
    reflect.add_argument("--json", action="store_true", help="print the API's JSON answer")


def cmd_retain(client: EngramClient, args: argparse.Namespace, out: TextIO) -> int:
    if args.file is not None and args.text not in (None, "-"):
        raise UsageError("give TEXT or --file, not both")
    if args.file is not None:
        text = read_text(args.file)
    elif args.text not in (None, "-"):
        text = args.text
    else:
        text = read_stdin()
    if not text.strip():
        raise UsageError("the text is empty")
    item: dict[str, Any] = {"content": text}
    for key, value in (
        ("document_id", args.document_id),
        ("timestamp", args.timestamp),
        ("context", args.context),
    ):
        if value is not None:
            item[key] = value
    if args.tag:
        item["tags"] = args.tag
    result = client.retain(bank(args), [item])
    documents = ", ".join(result.get("document_ids") or [])
    out.write(
        f"retained: {result.get('facts_added', 0)} facts added, "
        f"{result.get('facts_removed', 0)} removed (document {documents})\n"
    )
    return 0


def cmd_recall(client: EngramClient, args: argparse.Namespace, out: TextIO) -> int:
    raw = client.recall_raw(
        bank(args), args.query, budget=args.budget, max_tokens=args.max_tokens, types=args.type
    )
    if args.json:
        out.write(json.dumps(raw, indent=2, ensure_ascii=False) + "\n")
        return 0
    hits = EngramClient.recall_hits(raw)[: max(args.limit, 0)]
    if not hits:
        out.write("no memories found\n")
        return 0
    rows = [
        (day(h.date), h.type, f"{h.score:.3f}" if h.score is not None else "-", h.text)
        for h in hits
    ]
    table(rows, ("DATE", "TYPE", "SCORE", "TEXT"), out)
    return 0


def cmd_reflect(client: EngramClient, args: argparse.Namespace, out: TextIO) -> int:
    raw = client.reflect_raw(bank(args), args.query, budget=args.budget, context=args.context)
    if args.json:
        out.write(json.dumps(raw, indent=2, ensure_ascii=False) + "\n")
        return 0
    out.write(str(raw.get("text", "")).rstrip() + "\n")
    based_on = raw.get("based_on") or {}
    sources = [
        (str(m.get("type") or "mental_model"), str(m.get("id")), str(m.get("text", "")))
        for m in [*based_on.get("mental_models", []), *based_on.get("memories", [])]
    ]
    if sources:
        out.write("\nbased on:\n")
        table(sources, ("TYPE", "ID", "TEXT"), out)
    return 0
