"""The `engram` command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from engine.errors import ConfigurationError
from engine.settings import Settings
from engram.supervisor import run_stack

EPILOG_UP = """examples:
  engram up                          # everything embedded, data in ./.engram
  ENGRAM_HOME=/srv/engram engram up  # data elsewhere
  ENGRAM_DATABASE_URL=postgresql://u@db/engram ENGRAM_TEMPORAL_ADDRESS=tmprl:7233 engram up
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="engram", description="Long-term memory for AI agents.")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser(
        "up",
        help="start the whole stack in the foreground",
        description="Start PostgreSQL, Temporal, a worker and the HTTP server; Ctrl-C stops.",
        epilog=EPILOG_UP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = Settings.from_env()
    except ConfigurationError as exc:
        print(f"engram: {exc}", file=sys.stderr)
        return 2
    if args.command == "up":
        return run_stack(settings)
    return 2


if __name__ == "__main__":
    sys.exit(main())
