"""Commands that work on the installation itself rather than through the HTTP API."""

from __future__ import annotations

import argparse
from typing import TextIO

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
