"""Commands that work on the installation itself rather than through the HTTP API."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import TextIO

from engine import retokenize
from engine.db import migrate
from engine.embedding import load_embedder
from engine.settings import Settings
from engram.backup import dump, engram_database, restore


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
