"""`engram forget` and `engram memories edit`: erasure and correction from the shell
(docs/lifecycle.md), over the HTTP API like every other command."""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from engram.cli_support import UsageError, bank, command, table
from engram.client import EngramClient

EPILOG_FORGET = """examples:
  engram forget --bank alice --entity "Bob Smith" --dry-run
  engram forget --bank alice --text "my old address"
  engram forget --bank alice --document chat-2024-05 --yes
  engram forget --bank alice --tag temp --before 2025-01-01 --yes
  engram forget --bank alice --id 3f2a...   (one memory)

Erasure is complete: the facts, their source text, links, entities left without mentions,
observations built on them; a tombstone keeps a re-import from bringing them back.
Without --yes (or with --dry-run) it only lists what would go.
"""

EPILOG_MEMORIES = """examples:
  engram memories edit --bank alice 3f2a... --text "Alice works at Globex"
  engram memories edit --bank alice 3f2a... --state invalidated --reason "left in May"
  engram memories edit --bank alice 3f2a... --occurred-start 2025-05-01 --tag work

The old text stays in the memory's history (GET .../memories/ID/history).
"""


def add_commands(commands: Any, banked: argparse.ArgumentParser) -> None:
    """Register `forget` and `memories` on the CLI's subcommands."""
    forget = command(commands, "forget", "forget memories completely", EPILOG_FORGET, [banked])
    forget.add_argument("--id", action="append", default=[], help="a memory id (repeatable)")
    forget.add_argument("--entity", help="an entity's name or id: its memories")
    forget.add_argument("--tag", action="append", default=[], help="memories with this tag")
    forget.add_argument("--document", help="the memories of this document")
    forget.add_argument("--text", help="memories whose text contains this")
    forget.add_argument("--after", help="memories from this date on (ISO-8601)")
    forget.add_argument("--before", help="memories before this date (ISO-8601)")
    forget.add_argument("--dry-run", action="store_true", help="only list what would go")
    forget.add_argument("--yes", action="store_true", help="forget without listing first")

    memories = command(commands, "memories", "correct a memory", EPILOG_MEMORIES)
    actions = memories.add_subparsers(dest="memory_command", required=True, metavar="ACTION")
    edit = command(
        actions, "edit", "correct a memory's text, dates, tags or state", EPILOG_MEMORIES, [banked]
    )
    edit.add_argument("memory_id", metavar="ID")
    edit.add_argument("--text", help="the corrected text (re-embedded and re-indexed)")
    edit.add_argument("--context")
    edit.add_argument("--occurred-start", help="ISO-8601; '' clears it")
    edit.add_argument("--occurred-end", help="ISO-8601; '' clears it")
    edit.add_argument("--tag", action="append", help="replace the tags (repeatable)")
    edit.add_argument(
        "--entity",
        action="append",
        help="replace the entities (repeatable; resolved as retain does)",
    )
    edit.add_argument(
        "--literal-entities",
        action="store_true",
        help="take --entity names literally (resolve_entities false)",
    )
    edit.add_argument("--state", choices=("valid", "invalidated"))
    edit.add_argument("--reason", help="why, kept in the history")


def cmd_forget(client: EngramClient, args: argparse.Namespace, out: TextIO) -> int:
    where: dict[str, Any] = {
        "memory_ids": args.id or None,
        "entity": args.entity,
        "tags": args.tag or None,
        "document_id": args.document,
        "text": args.text,
        "start_date": args.after,
        "end_date": args.before,
    }
    where = {k: v for k, v in where.items() if v}
    if not where:
        raise UsageError(
            "engram forget: say what to forget (--id, --entity, --tag, --document, "
            "--text, --after, --before)"
        )
    dry_run = args.dry_run or not args.yes
    result = client.forget(bank(args), where, dry_run=dry_run)
    rows = [
        (m["id"][:8], "also" if m["collateral"] else "", m["text"][:70]) for m in result["memories"]
    ]
    if rows:
        table(rows, ("ID", "", "TEXT"), out)
    verb = "would forget" if dry_run else "forgot"
    out.write(
        f"{verb} {result['deleted_count']} memories, {len(result['observations_retracted'])}"
        f" observations, {len(result['entities_removed'])} entities"
        f", {len(result['documents_deleted'])} documents\n"
    )
    if dry_run and not args.dry_run and result["deleted_count"]:
        out.write("nothing was forgotten yet: add --yes to forget these\n")
    return 0


def cmd_memories(client: EngramClient, args: argparse.Namespace, out: TextIO) -> int:
    changes: dict[str, Any] = {
        "text": args.text,
        "context": args.context,
        "occurred_start": args.occurred_start,
        "occurred_end": args.occurred_end,
        "tags": args.tag,
        "entities": args.entity,
        "state": args.state,
        "reason": args.reason,
    }
    changes = {k: v for k, v in changes.items() if v is not None}
    if not changes:
        raise UsageError("engram memories edit: give at least one change (--text, --state, ...)")
    if args.literal_entities:
        changes["resolve_entities"] = False
    memory = client.update_memory(bank(args), args.memory_id, changes)
    out.write(f"{memory['id']}  [{memory['state']}]  {memory['text']}\n")
    return 0
