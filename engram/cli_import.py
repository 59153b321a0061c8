"""`engram import` (with its progress bar, detach and re-attach) and `engram export`."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

from engram.cli_support import UsageError, bank, command, read_stdin, read_text
from engram.client import ApiError, EngramClient, ImportFile, ImportStatus
from engram.progress import ProgressDisplay, duration

# How often a watched import is polled.
POLL_S = 0.5
# File types a folder import reads; others (images, binaries) are left alone.
FOLDER_SUFFIXES = (".md", ".markdown", ".txt", ".text", ".jsonl", ".json")
FORMATS = ("jsonl", "chatgpt", "locomo", "text")

EPILOG_IMPORT = """examples:
  engram import conversations.json --bank alice        # a ChatGPT data export
  engram import chat.jsonl --bank alice --user-name Alice
  engram import ~/notes --bank alice                   # a folder of .md/.txt files
  engram import locomo10.json --bank eval --format locomo --on-error stop
  engram import big.jsonl --bank alice --detach        # start it and return
  engram import status 6f1c...                         # re-attach to an import

formats (detected when --format is not given):
  jsonl    JSON Lines (or a JSON array) of messages: role or speaker, content, timestamp,
           optional conversation_id; lines without a speaker are items as they are (what
           `engram export` writes); one document per conversation
  chatgpt  the ChatGPT data export's conversations.json; one document per conversation
  locomo   conversations of dated sessions; one document per conversation
  text     plain text or Markdown; one document per file

Ctrl-C while watching detaches: the import goes on, `engram import status ID` re-attaches.
Importing the same file again changes nothing; a grown export adds only what is new.
"""
EPILOG_EXPORT = """examples:
  engram export --bank alice > alice.jsonl
  engram export --bank alice -o alice.jsonl && engram import alice.jsonl --bank alice-copy
"""


def add_import_commands(commands: Any, banked: argparse.ArgumentParser) -> None:
    """Register `import` and `export`."""
    imp = command(
        commands,
        "import",
        "import chat history or notes with a progress bar",
        EPILOG_IMPORT,
        [banked],
    )
    imp.add_argument("source", metavar="FILE|DIR|status", help="what to import ('-': stdin)")
    imp.add_argument("operation", nargs="?", metavar="ID", help="with `status`: the import")
    imp.add_argument("--format", choices=FORMATS, help="the file format (default: detect)")
    imp.add_argument(
        "--on-error",
        choices=("skip", "stop"),
        default="skip",
        help="a malformed record is reported and skipped, or stops the import",
    )
    imp.add_argument("--user-name", help="speaker name for role 'user' (default User)")
    imp.add_argument("--assistant-name", help="speaker for role 'assistant' (default Assistant)")
    imp.add_argument("--operation-id", help="idempotency key: the same id never imports twice")
    imp.add_argument("--detach", action="store_true", help="start the import and return")

    export = command(
        commands,
        "export",
        "write a bank as JSON Lines that import reads back",
        EPILOG_EXPORT,
        [banked],
    )
    export.add_argument("--output", "-o", type=Path, help="write here instead of stdout")


def import_files(source: str) -> list[ImportFile]:
    if source == "-":
        return [ImportFile("", read_stdin())]
    path = Path(source).expanduser()
    if path.is_dir():
        files = sorted(
            p
            for p in path.rglob("*")
            if p.is_file()
            and p.suffix.lower() in FOLDER_SUFFIXES
            and not any(part.startswith(".") for part in p.relative_to(path).parts)
        )
        if not files:
            raise UsageError(f"{source}: no {'/'.join(FOLDER_SUFFIXES)} files in it")
        return [ImportFile(p.relative_to(path).as_posix(), read_text(p)) for p in files]
    return [ImportFile(path.name, read_text(path))]


def summary(status: ImportStatus) -> str:
    result = status.result or {}
    counts = status.progress
    facts = result.get("facts_added", counts.facts_added)
    line = (
        f"imported {result.get('documents', counts.documents_done):,} documents, "
        f"{result.get('items', counts.items_done):,} items: {facts:,} facts added"
    )
    removed = result.get("facts_removed", 0)
    if removed:
        line += f", {removed:,} removed"
    return line


def elapsed(status: ImportStatus) -> float | None:
    try:
        from_ = _parse_time(status.created_at)
        to = _parse_time(status.updated_at)
    except ValueError:
        return None
    return max(to - from_, 0.0)


def _parse_time(value: str) -> float:
    return datetime.fromisoformat(value).timestamp()


def watch_import(
    client: EngramClient, operation_id: str, out: TextIO, sleep: Callable[[float], None]
) -> int:
    display = ProgressDisplay(out)
    try:
        while True:
            status = client.import_status(operation_id)
            display.update(status.progress)
            if status.finished:
                break
            sleep(POLL_S)
    except KeyboardInterrupt:
        display.finish()
        out.write(
            f"detached: the import goes on. Re-attach with: engram import status {operation_id}\n"
        )
        return 0
    display.finish()
    seconds = elapsed(status)
    took = ""
    if seconds:
        items = (status.result or {}).get("items", status.progress.items_done)
        took = f" in {duration(seconds)} ({items / seconds:,.1f} items/s)"
    if status.skipped:
        first = status.errors[0] if status.errors else None
        where = f" (first: {first.position}: {first.message})" if first else ""
        out.write(f"{status.skipped:,} malformed records skipped{where}\n")
    if status.status == "completed":
        out.write(summary(status) + took + "\n")
        return 0
    out.write(summary(status) + "\n")
    raise ApiError(f"import {status.status}: {status.error or 'no reason given'}")


def cmd_import(client: EngramClient, args: argparse.Namespace, out: TextIO) -> int:
    if args.source == "status":
        if not args.operation:
            raise UsageError("engram import status ID: the import's operation id is missing")
        return watch_import(client, args.operation, out, time.sleep)
    if args.operation:
        raise UsageError(f"unexpected argument {args.operation!r}")
    files = import_files(args.source)
    started = client.start_import(
        bank(args),
        files,
        format=args.format,
        on_error=args.on_error,
        operation_id=args.operation_id,
        user_name=args.user_name,
        assistant_name=args.assistant_name,
    )
    out.write(
        f"import {started.operation_id} into {started.bank_id}: {started.documents:,} documents,"
        f" {started.items:,} items ({', '.join(started.formats)})\n"
    )
    for error in started.errors[:5]:
        out.write(f"  skipped {error.position}: {error.message}\n")
    if started.skipped > 5:
        out.write(f"  ... and {started.skipped - 5:,} more skipped\n")
    if args.detach:
        out.write(f"watch it with: engram import status {started.operation_id}\n")
        return 0
    return watch_import(client, started.operation_id, out, time.sleep)


def cmd_export(client: EngramClient, args: argparse.Namespace, out: TextIO) -> int:
    lines = client.export_lines(bank(args))
    if args.output is None:
        for line in lines:
            out.write(line + "\n")
        return 0
    count = 0
    with args.output.open("w", encoding="utf-8") as target:
        for line in lines:
            target.write(line + "\n")
            count += 1
    sys.stderr.write(f"exported {count:,} items to {args.output}\n")
    return 0
