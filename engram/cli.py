"""The `engram` command line: the stack (`up`) and what a user does by hand over the HTTP API.

Every API command talks to `--url`, else `ENGRAM_URL`, else the local stack; `--bank` defaults
to `ENGRAM_BANK`. Errors print one line (`engram: ...`) and exit non-zero: 1 when the server
refused or failed, 2 for a usage problem.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import TextIO

import anyio

from engine.errors import ConfigurationError
from engine.settings import Settings
from engram.backup import BackupError
from engram.cli_admin import add_admin_commands, cmd_backup, cmd_migrate, cmd_restore, cmd_serve
from engram.cli_banks import (
    add_bank_commands,
    add_content_commands,
    cmd_banks,
    cmd_documents,
    cmd_entities,
    cmd_status,
)
from engram.cli_import import add_import_commands, cmd_export, cmd_import
from engram.cli_keys import KeysError, add_keys_parser, cmd_keys
from engram.cli_memories import add_commands as add_memory_commands
from engram.cli_memories import cmd_forget, cmd_memories
from engram.cli_reembed import add_reembed_parser, cmd_reembed
from engram.cli_retain_recall import (
    add_recall_commands,
    add_retain_command,
    cmd_recall,
    cmd_reflect,
    cmd_retain,
)
from engram.cli_retokenize import add_retokenize_parser, cmd_retokenize
from engram.cli_support import UsageError, command
from engram.client import DEFAULT_URL, ApiError, EngramClient
from engram.supervisor import run_stack
from server.mcp_server.stdio import serve_stdio

EPILOG_MCP = """examples:
  engram mcp --bank alice            # tools without bank_id, pinned to bank alice
  engram mcp                         # every tool takes bank_id; bank management included
  Claude Desktop (claude_desktop_config.json):
    {"mcpServers": {"engram": {"command": "engram", "args": ["mcp", "--bank", "alice"]}}}
"""


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

    add_admin_commands(commands)
    add_reembed_parser(commands)
    add_retokenize_parser(commands)
    add_bank_commands(commands, connection)
    add_retain_command(commands, banked)
    mcp = command(
        commands,
        "mcp",
        "serve the MCP tools on stdin/stdout (for Claude Desktop, Cursor, ...)",
        EPILOG_MCP,
        [connection],
    )
    mcp.add_argument(
        "--bank", "-b", help="pin every tool to this bank (default: $ENGRAM_BANK, else all banks)"
    )
    add_recall_commands(commands, banked)
    add_import_commands(commands, banked)
    add_content_commands(commands, banked)
    add_keys_parser(commands)
    add_memory_commands(commands, banked)
    return parser


LOCAL_COMMANDS: dict[str, Callable[[Settings, argparse.Namespace, TextIO], int]] = {
    "backup": cmd_backup,
    "restore": cmd_restore,
    "migrate": cmd_migrate,
    "serve": cmd_serve,
    "reembed": cmd_reembed,
    "retokenize": cmd_retokenize,
    "keys": cmd_keys,
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
    try:
        return run_command(args)
    except (ConfigurationError, UsageError) as exc:
        print(f"engram: {exc}", file=sys.stderr)
        return 2
    except (ApiError, BackupError, KeysError) as exc:
        print(f"engram: {exc}", file=sys.stderr)
        return 1


def run_command(args: argparse.Namespace) -> int:
    """The stack, a command on the installation itself, the MCP server on stdio, or an API
    command; `main` turns their errors into the exit codes the module docstring states."""
    if args.command == "up":
        return run_stack(Settings.from_env())
    if args.command in LOCAL_COMMANDS:
        return LOCAL_COMMANDS[args.command](Settings.from_env(), args, sys.stdout)
    url = args.url or os.environ.get("ENGRAM_URL") or DEFAULT_URL
    if args.command == "mcp":
        pinned = args.bank or os.environ.get("ENGRAM_BANK") or None
        anyio.run(serve_stdio, url, pinned, os.environ.get("ENGRAM_API_KEY"))
        return 0
    try:
        with EngramClient(url, api_key=os.environ.get("ENGRAM_API_KEY")) as client:
            return COMMANDS[args.command](client, args, sys.stdout)
    except BrokenPipeError:
        return 0  # `engram export | head`: the reader had enough


if __name__ == "__main__":
    sys.exit(main())
