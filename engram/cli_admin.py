"""Commands that work on the installation itself rather than through the HTTP API."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import Any, TextIO

from engine import retokenize
from engine.db import migrate
from engine.embedding import load_embedder
from engine.settings import Settings
from engram.backup import dump, engram_database, restore
from engram.cli_support import command

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


def add_admin_commands(commands: Any) -> None:
    """Register `up`, `backup`, `restore`, `serve` and `migrate`."""
    command(commands, "up", "start the whole stack in the foreground; Ctrl-C stops", EPILOG_UP)
    backup = command(
        commands, "backup", "write a consistent copy of the whole database", EPILOG_BACKUP
    )
    backup.add_argument("file", type=Path, metavar="FILE")
    restore = command(
        commands, "restore", "load a backup into an empty installation", EPILOG_BACKUP
    )
    restore.add_argument("file", type=Path, metavar="FILE")
    serve = command(
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
    command(
        commands,
        "migrate",
        "apply pending schema migrations to the configured database and exit",
        EPILOG_BACKUP,
    )


def cmd_backup(settings: Settings, args: argparse.Namespace, out: TextIO) -> int:
    with engram_database(settings) as dsn:
        dump(dsn, args.file)
    size = args.file.stat().st_size
    out.write(f"backed up to {args.file} ({size / 2**20:,.1f} MiB)\n")
    return 0


def cmd_restore(settings: Settings, args: argparse.Namespace, out: TextIO) -> int:
    with engram_database(settings) as dsn:
        restore(dsn, args.file)
    where = "ENGRAM_DATABASE_URL" if settings.database_url else str(settings.home)
    out.write(f"restored {args.file} into {where}; start Engram with `engram up`\n")
    return 0


def cmd_migrate(settings: Settings, args: argparse.Namespace, out: TextIO) -> int:
    """What a Kubernetes migration Job or a deploy script runs before rolling out servers and
    workers (they also migrate at start, under an advisory lock, so this is an ordering aid)."""
    embedder = load_embedder(settings.embedding_model, settings.model_dir)
    with engram_database(settings) as dsn:
        applied = asyncio.run(migrate(dsn, embedder.dimension, embedder.space))
    out.write(f"applied {', '.join(applied)}\n" if applied else "the schema is up to date\n")
    if retokenize.TERMS_MIGRATION in applied:
        out.write(f"note: {retokenize.ADVICE}\n")
    return 0


def cmd_serve(settings: Settings, args: argparse.Namespace, out: TextIO) -> int:
    """`python -m server` with the process count from the command line."""
    if args.processes is not None:
        if args.processes < 1:
            out.write("engram: --processes must be at least 1\n")
            return 2
        os.environ["ENGRAM_API_PROCESSES"] = str(args.processes)
    out.flush()
    os.execv(sys.executable, [sys.executable, "-m", "server"])
