"""The `engram` command line: the stack (`up`) and what a user does by hand over the HTTP API.

Every API command talks to `--url`, else `ENGRAM_URL`, else the local stack; `--bank` defaults
to `ENGRAM_BANK`. Errors print one line (`engram: ...`) and exit non-zero: 1 when the server
refused or failed, 2 for a usage problem.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

import anyio

from engine.errors import ConfigurationError
from engine.settings import Settings
from engram.backup import BackupError
from engram.cli_admin import cmd_backup, cmd_migrate, cmd_restore, cmd_serve
from engram.cli_import import cmd_export, cmd_import
from engram.cli_keys import KeysError, add_keys_parser, cmd_keys
from engram.cli_memories import add_commands as add_memory_commands
from engram.cli_memories import cmd_forget, cmd_memories
from engram.cli_reembed import cmd_reembed
from engram.cli_retokenize import cmd_retokenize
from engram.cli_support import UsageError, bank, day, read_stdin, read_text, table
from engram.client import DEFAULT_URL, ApiError, EngramClient
from engram.supervisor import run_stack
from server.mcp_server.stdio import serve_stdio

FORMATS = ("jsonl", "chatgpt", "locomo", "text")

EPILOG_UP = """examples:
  engram up                          # everything embedded, data in ./.engram
  ENGRAM_HOME=/srv/engram engram up  # data elsewhere
  ENGRAM_DATABASE_URL=postgresql://u@db/engram ENGRAM_TEMPORAL_ADDRESS=tmprl:7233 engram up
"""
EPILOG_BACKUP = """examples:
  engram backup engram-2026-12-01.dump       # while `engram up` runs, or with it stopped
  ENGRAM_HOME=/srv/engram-new engram restore engram-2026-12-01.dump
The database named by ENGRAM_DATABASE_URL, else the embedded one under ENGRAM_HOME, is used;
a restore needs an empty target and refuses otherwise.
"""
EPILOG_SERVE = """examples:
  ENGRAM_DATABASE_URL=postgresql://u@db/engram ENGRAM_TEMPORAL_ADDRESS=tmprl:7233 \\
    engram serve --processes 4
Each process has its own connection pool (ENGRAM_DB_POOL_MAX) and model: keep
processes x pool size (plus the workers' pools) under PostgreSQL's max_connections.
"""
EPILOG_REEMBED = """examples:
  engram reembed --model onnx:/models/e5.onnx:/models/tokenizer.json:384
  engram reembed --status
  engram reembed --cancel       # before the switch only; the old vectors stay in use
Runs on the workers while `engram up` (or your deployment) runs; recall answers from the old
vectors until the switch, then every process follows within seconds. Afterwards set
ENGRAM_EMBEDDING_MODEL to the new model for the next start.
"""
EPILOG_RETOKENIZE = """examples:
  engram retokenize                  # every bank; safe while `engram up` runs
  engram retokenize --bank alice
  engram retokenize --status         # how many memories an older tokeniser indexed
Needed once after upgrading a database that stored Chinese text before Chinese word
segmentation (migration 0024); stopped at any point, it resumes where it was.
"""
EPILOG_MCP = """examples:
  engram mcp --bank alice            # tools without bank_id, pinned to bank alice
  engram mcp                         # every tool takes bank_id; bank management included
  Claude Desktop (claude_desktop_config.json):
    {"mcpServers": {"engram": {"command": "engram", "args": ["mcp", "--bank", "alice"]}}}
"""
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
EPILOG_DOCUMENTS = """examples:
  engram documents --bank alice
  engram documents --bank alice --query lisbon --limit 20
"""
EPILOG_ENTITIES = """examples:
  engram entities --bank alice
  engram entities --bank alice --limit 10
"""


def _command(
    commands: Any,
    name: str,
    help_text: str,
    epilog: str,
    parents: Sequence[argparse.ArgumentParser] = (),
) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = commands.add_parser(
        name,
        help=help_text,
        description=help_text[0].upper() + help_text[1:] + ".",
        epilog=epilog,
        parents=list(parents),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    return parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="engram",
        description="Long-term memory for AI agents.",
        epilog="`engram COMMAND --help` shows examples for each command.",
    )
    connection = argparse.ArgumentParser(add_help=False)
    connection.add_argument(
        "--url", help=f"Engram's HTTP API (default: $ENGRAM_URL, else {DEFAULT_URL})"
    )
    banked = argparse.ArgumentParser(add_help=False, parents=[connection])
    banked.add_argument("--bank", "-b", help="the memory bank (default: $ENGRAM_BANK)")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    _command(commands, "up", "start the whole stack in the foreground; Ctrl-C stops", EPILOG_UP)
    backup = _command(
        commands, "backup", "write a consistent copy of the whole database", EPILOG_BACKUP
    )
    backup.add_argument("file", type=Path, metavar="FILE")
    restore = _command(
        commands, "restore", "load a backup into an empty installation", EPILOG_BACKUP
    )
    restore.add_argument("file", type=Path, metavar="FILE")
    serve = _command(
        commands,
        "serve",
        "run only the HTTP server (PostgreSQL and Temporal from the environment)",
        EPILOG_SERVE,
    )
    serve.add_argument(
        "--processes",
        "--workers",
        type=int,
        help="server processes sharing the port (default $ENGRAM_API_PROCESSES, else 1)",
    )
    _command(
        commands,
        "migrate",
        "apply pending schema migrations to the configured database and exit",
        EPILOG_BACKUP,
    )
    reembed = _command(
        commands,
        "reembed",
        "switch the database to another embedding model while recall keeps answering",
        EPILOG_REEMBED,
    )
    reembed.add_argument("--model", help="the new model, as ENGRAM_EMBEDDING_MODEL names it")
    reembed.add_argument("--batch-size", type=int, default=256, help="facts per step")
    reembed.add_argument("--no-wait", action="store_true", help="start it and return")
    reembed.add_argument("--status", action="store_true", help="show the last run's progress")
    reembed.add_argument("--cancel", action="store_true", help="cancel a run before its switch")
    retokenize = _command(
        commands,
        "retokenize",
        "rewrite keyword-index terms stored by an older tokeniser",
        EPILOG_RETOKENIZE,
    )
    retokenize.add_argument("--bank", "-b", help="one bank only (default: all)")
    retokenize.add_argument("--batch-size", type=int, default=500, help="memories per step")
    retokenize.add_argument("--status", action="store_true", help="count, change nothing")
    _command(
        commands,
        "status",
        "show whether the API, database and Temporal are ready",
        EPILOG_STATUS,
        [connection],
    )

    banks = _command(commands, "banks", "list, create, show or delete banks", EPILOG_BANKS)
    bank_commands = banks.add_subparsers(dest="bank_command", required=True, metavar="ACTION")
    _command(bank_commands, "list", "list the banks", EPILOG_BANKS, [connection])
    create = _command(
        bank_commands, "create", "create a bank (or update it)", EPILOG_BANKS, [connection]
    )
    create.add_argument("bank_id", metavar="BANK")
    create.add_argument("--name")
    create.add_argument("--mission")
    create.add_argument("--extraction-mode", choices=("llm", "local", "none"))
    show = _command(
        bank_commands, "show", "show a bank's profile and counts", EPILOG_BANKS, [connection]
    )
    show.add_argument("bank_id", metavar="BANK")
    delete = _command(
        bank_commands, "delete", "delete a bank and all its memories", EPILOG_BANKS, [connection]
    )
    delete.add_argument("bank_id", metavar="BANK")
    delete.add_argument("--yes", action="store_true", help="do not ask for confirmation")

    retain = _command(commands, "retain", "turn text into memories", EPILOG_RETAIN, [banked])
    retain.add_argument("text", nargs="?", metavar="TEXT", help="the text ('-' or none: stdin)")
    retain.add_argument("--file", "-f", type=Path, help="read the text from this file")
    retain.add_argument("--document-id", help="update this document instead of adding one")
    retain.add_argument("--timestamp", help="when it was said (ISO-8601; default now)")
    retain.add_argument("--context", help="what the text is (e.g. 'team meeting')")
    retain.add_argument("--tag", action="append", default=[], help="a tag (repeatable)")

    mcp = _command(
        commands,
        "mcp",
        "serve the MCP tools on stdin/stdout (for Claude Desktop, Cursor, ...)",
        EPILOG_MCP,
        [connection],
    )
    mcp.add_argument(
        "--bank", "-b", help="pin every tool to this bank (default: $ENGRAM_BANK, else all banks)"
    )

    recall = _command(commands, "recall", "find memories for a question", EPILOG_RECALL, [banked])
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

    reflect = _command(
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

    imp = _command(
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

    export = _command(
        commands,
        "export",
        "write a bank as JSON Lines that import reads back",
        EPILOG_EXPORT,
        [banked],
    )
    export.add_argument("--output", "-o", type=Path, help="write here instead of stdout")

    documents = _command(
        commands, "documents", "list a bank's documents", EPILOG_DOCUMENTS, [banked]
    )
    documents.add_argument("--query", "-q", help="only ids or texts containing this")
    documents.add_argument("--limit", type=int, default=50)
    entities = _command(
        commands,
        "entities",
        "list a bank's entities, most mentioned first",
        EPILOG_ENTITIES,
        [banked],
    )
    entities.add_argument("--limit", type=int, default=50)
    add_keys_parser(commands, _command)
    add_memory_commands(commands, _command, banked)
    return parser


# --- commands ---------------------------------------------------------------------------


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


def cmd_documents(client: EngramClient, args: argparse.Namespace, out: TextIO) -> int:
    page = client.documents(bank(args), limit=args.limit, query=args.query)
    rows = [
        (
            d["id"],
            str(d.get("memory_unit_count", 0)),
            f"{d.get('text_length', 0):,}",
            day(d.get("updated_at")),
        )
        for d in page["items"]
    ]
    if not rows:
        out.write("no documents\n")
        return 0
    table([(r[3], r[1], r[2], r[0]) for r in rows], ("UPDATED", "FACTS", "CHARS", "DOCUMENT"), out)
    if page["total"] > len(rows):
        out.write(f"({len(rows)} of {page['total']:,}; use --limit)\n")
    return 0


def cmd_entities(client: EngramClient, args: argparse.Namespace, out: TextIO) -> int:
    page = client.entities(bank(args), limit=args.limit)
    rows = [
        (str(e.get("mention_count", 0)), day(e.get("last_seen")), e["canonical_name"])
        for e in page["items"]
    ]
    if not rows:
        out.write("no entities\n")
        return 0
    table(rows, ("MENTIONS", "LAST SEEN", "NAME"), out)
    if page["total"] > len(rows):
        out.write(f"({len(rows)} of {page['total']:,}; use --limit)\n")
    return 0


LOCAL_COMMANDS: dict[str, Callable[[Settings, argparse.Namespace, TextIO], int]] = {
    "backup": cmd_backup,
    "restore": cmd_restore,
    "migrate": cmd_migrate,
    "serve": cmd_serve,
    "reembed": cmd_reembed,
    "retokenize": cmd_retokenize,
}
COMMANDS: dict[str, Callable[[EngramClient, argparse.Namespace, TextIO], int]] = {
    "status": cmd_status,
    "banks": cmd_banks,
    "retain": cmd_retain,
    "recall": cmd_recall,
    "reflect": cmd_reflect,
    "import": cmd_import,
    "export": cmd_export,
    "documents": cmd_documents,
    "entities": cmd_entities,
    "forget": cmd_forget,
    "memories": cmd_memories,
}


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "up":
        try:
            settings = Settings.from_env()
        except ConfigurationError as exc:
            print(f"engram: {exc}", file=sys.stderr)
            return 2
        return run_stack(settings)
    if args.command == "keys":
        return _keys_main(args)
    if args.command in LOCAL_COMMANDS:
        try:
            return LOCAL_COMMANDS[args.command](Settings.from_env(), args, sys.stdout)
        except ConfigurationError as exc:
            print(f"engram: {exc}", file=sys.stderr)
            return 2
        except BackupError as exc:
            print(f"engram: {exc}", file=sys.stderr)
            return 1
    url = args.url or os.environ.get("ENGRAM_URL") or DEFAULT_URL
    if args.command == "mcp":
        pinned = args.bank or os.environ.get("ENGRAM_BANK") or None
        anyio.run(serve_stdio, url, pinned, os.environ.get("ENGRAM_API_KEY"))
        return 0
    try:
        with EngramClient(url, api_key=os.environ.get("ENGRAM_API_KEY")) as client:
            return COMMANDS[args.command](client, args, sys.stdout)
    except UsageError as exc:
        print(f"engram: {exc}", file=sys.stderr)
        return 2
    except ApiError as exc:
        print(f"engram: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0  # `engram export | head`: the reader had enough


def _keys_main(args: argparse.Namespace) -> int:
    try:
        return cmd_keys(Settings.from_env(), args, sys.stdout)
    except (ConfigurationError, UsageError) as exc:
        print(f"engram: {exc}", file=sys.stderr)
        return 2
    except KeysError as exc:
        print(f"engram: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
