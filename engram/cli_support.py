"""What the `engram` commands share: building a subcommand, the usage error, reading input,
printing tables."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO


def command(
    commands: Any,
    name: str,
    help_text: str,
    epilog: str,
    parents: Sequence[argparse.ArgumentParser] = (),
) -> argparse.ArgumentParser:
    """A subcommand of `commands` whose help keeps the epilog's examples as written."""
    parser: argparse.ArgumentParser = commands.add_parser(
        name,
        help=help_text,
        description=help_text[0].upper() + help_text[1:] + ".",
        epilog=epilog,
        parents=list(parents),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    return parser


class UsageError(Exception):
    """The command line asks for something impossible; exit code 2."""


def bank(args: argparse.Namespace) -> str:
    value: str | None = args.bank or os.environ.get("ENGRAM_BANK")
    if not value:
        raise UsageError(f"engram {args.command}: --bank is required (or set ENGRAM_BANK)")
    return value


def read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise UsageError(f"{path}: no such file") from exc
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 text") from exc
    except OSError as exc:
        raise UsageError(f"{path}: {exc.strerror}") from exc


def read_stdin() -> str:
    if sys.stdin.isatty():
        raise UsageError("nothing on stdin: give the text as an argument or with --file")
    return sys.stdin.read()


def table(rows: Sequence[Sequence[str]], header: Sequence[str], out: TextIO) -> None:
    """Columns as wide as their content; the last one is cut to the terminal width."""
    width = shutil.get_terminal_size((120, 24)).columns
    all_rows = [list(header), *[list(r) for r in rows]]
    widths = [max(len(r[i]) for r in all_rows) for i in range(len(header) - 1)]
    room = max(width - sum(widths) - 2 * len(widths), 20)
    for row in all_rows:
        cells = [cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])]
        last = row[-1].replace("\n", " ")
        if len(last) > room:
            last = last[: room - 1] + "…"
        out.write("  ".join([*cells, last]).rstrip() + "\n")


def page_table(
    rows: Sequence[Sequence[str]], header: Sequence[str], total: int, what: str, out: TextIO
) -> None:
    """One page of a listing: `no <what>`, or the table and how many more there are."""
    if not rows:
        out.write(f"no {what}\n")
        return
    table(rows, header, out)
    if total > len(rows):
        out.write(f"({len(rows)} of {total:,}; use --limit)\n")


def day(value: str | None) -> str:
    return value[:10] if value else "-"
