"""`engram status`, `banks`, `documents` and `entities`: what a server holds, over the HTTP
API."""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

from engram.cli_support import UsageError, bank, command, day, page_table, table
from engram.client import ApiError, EngramClient

EPILOG_STATUS = """examples:
  engram status
  engram status --url http://memory.internal:8888
"""
EPILOG_BANKS = """examples:
  engram banks list
  engram banks create alice --name "Alice's assistant" --mission "Remember Alice's projects"
  engram banks show alice
  engram banks delete alice --yes
"""
EPILOG_DOCUMENTS = """examples:
  engram documents --bank alice
  engram documents --bank alice --query lisbon --limit 20
"""
EPILOG_ENTITIES = """examples:
  engram entities --bank alice
  engram entities --bank alice --limit 10
"""


def add_bank_commands(commands: Any, connection: argparse.ArgumentParser) -> None:
    """Register `status` and `banks`."""
    command(
        commands,
        "status",
        "show whether the API, database and Temporal are ready",
        EPILOG_STATUS,
        [connection],
    )

    banks = command(commands, "banks", "list, create, show or delete banks", EPILOG_BANKS)
    bank_commands = banks.add_subparsers(dest="bank_command", required=True, metavar="ACTION")
    command(bank_commands, "list", "list the banks", EPILOG_BANKS, [connection])
    create = command(
        bank_commands, "create", "create a bank (or update it)", EPILOG_BANKS, [connection]
    )
    create.add_argument("bank_id", metavar="BANK")
    create.add_argument("--name")
    create.add_argument("--mission")
    create.add_argument("--extraction-mode", choices=("llm", "local", "none"))
    show = command(
        bank_commands, "show", "show a bank's profile and counts", EPILOG_BANKS, [connection]
    )
    show.add_argument("bank_id", metavar="BANK")
    delete = command(
        bank_commands, "delete", "delete a bank and all its memories", EPILOG_BANKS, [connection]
    )
    delete.add_argument("bank_id", metavar="BANK")
    delete.add_argument("--yes", action="store_true", help="do not ask for confirmation")


def add_content_commands(commands: Any, banked: argparse.ArgumentParser) -> None:
    """Register `documents` and `entities`."""
    documents = command(
        commands, "documents", "list a bank's documents", EPILOG_DOCUMENTS, [banked]
    )
    documents.add_argument("--query", "-q", help="only ids or texts containing this")
    documents.add_argument("--limit", type=int, default=50)
    entities = command(
        commands,
        "entities",
        "list a bank's entities, most mentioned first",
        EPILOG_ENTITIES,
        [banked],
    )
    entities.add_argument("--limit", type=int, default=50)


def cmd_status(client: EngramClient, args: argparse.Namespace, out: TextIO) -> int:
    version = client.version()
    ready, checks = client.ready()
    detail = ", ".join(f"{k} {v}" for k, v in checks.items())
    state = "ready" if ready else "not ready"
    out.write(f"Engram {version.get('engram_version', '?')} at {client.base_url}: {state}")
    out.write(f" ({detail})\n" if detail else "\n")
    if not ready:
        raise ApiError(f"not ready: {detail}")
    banks = client.list_banks()
    out.write(f"{len(banks)} bank{'s' if len(banks) != 1 else ''}\n")
    return 0


def cmd_banks(client: EngramClient, args: argparse.Namespace, out: TextIO) -> int:
    action = args.bank_command
    if action == "list":
        banks = client.list_banks()
        if not banks:
            out.write("no banks yet\n")
            return 0
        rows = [(b["bank_id"], b.get("name") or "", day(b.get("created_at"))) for b in banks]
        table(rows, ("BANK", "NAME", "CREATED"), out)
        return 0
    bank_id: str = args.bank_id
    if action == "create":
        settings = {
            key: value
            for key, value in (
                ("name", args.name),
                ("mission", args.mission),
                ("extraction_mode", args.extraction_mode),
            )
            if value is not None
        }
        profile = client.put_bank(bank_id, settings)
        out.write(f"bank {profile['bank_id']} ready\n")
        return 0
    if action == "show":
        profile = client.bank_profile(bank_id)
        stats = client.bank_stats(bank_id)
        config = profile.get("config") or {}
        for label, value in (
            ("bank", profile["bank_id"]),
            ("name", profile.get("name") or ""),
            ("mission", profile.get("mission") or ""),
            ("extraction", config.get("extraction_mode") or "server default"),
            ("created", profile.get("created_at") or ""),
            ("documents", stats.get("total_documents", 0)),
            ("facts", stats.get("total_nodes", 0)),
            ("entities", stats.get("total_entities", 0)),
            ("links", stats.get("total_links", 0)),
        ):
            out.write(f"{label:<11}{value}\n")
        return 0
    if not args.yes:
        if not sys.stdin.isatty():
            raise UsageError(f"deleting bank {bank_id} needs --yes")
        answer = input(f"delete bank {bank_id} and all its memories? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            out.write("nothing deleted\n")
            return 1
    client.delete_bank(bank_id)
    out.write(f"bank {bank_id} deleted\n")
    return 0


def cmd_documents(client: EngramClient, args: argparse.Namespace, out: TextIO) -> int:
    page = client.documents(bank(args), limit=args.limit, query=args.query)
    rows = [
        (
            day(d.get("updated_at")),
            str(d.get("memory_unit_count", 0)),
            f"{d.get('text_length', 0):,}",
            d["id"],
        )
        for d in page["items"]
    ]
    page_table(rows, ("UPDATED", "FACTS", "CHARS", "DOCUMENT"), page["total"], "documents", out)
    return 0


def cmd_entities(client: EngramClient, args: argparse.Namespace, out: TextIO) -> int:
    page = client.entities(bank(args), limit=args.limit)
    rows = [
        (str(e.get("mention_count", 0)), day(e.get("last_seen")), e["canonical_name"])
        for e in page["items"]
    ]
    page_table(rows, ("MENTIONS", "LAST SEEN", "NAME"), page["total"], "entities", out)
    return 0
