"""`engram retokenize`: rewrite the BM25 postings that an older tokeniser stored (a bank
that kept Chinese before the word segmentation), in batches, while Engram keeps running.

It runs in this process against the database (engine/retokenize.py, the same
`term_frequencies` retain stores with); progress is kept in the rows, so a run stopped with
Ctrl-C resumes where it stopped when started again."""

from __future__ import annotations

import argparse
import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TextIO

from engine import retokenize
from engine.db import create_pool
from engine.errors import ConfigurationError
from engine.settings import Settings
from engram.backup import engram_database
from engram.cli_support import command

EPILOG_RETOKENIZE = """examples:
  engram retokenize                  # every bank; safe while `engram up` runs
  engram retokenize --bank alice
  engram retokenize --status         # how many memories an older tokeniser indexed
Needed once after upgrading a database that stored Chinese text before Chinese word
segmentation (migration 0024); stopped at any point, it resumes where it was.
"""


def add_retokenize_parser(commands: Any) -> None:
    retokenize = command(
        commands,
        "retokenize",
        "rewrite keyword-index terms stored by an older tokeniser",
        EPILOG_RETOKENIZE,
    )
    retokenize.add_argument("--bank", "-b", help="one bank only (default: all)")
    retokenize.add_argument("--batch-size", type=int, default=500, help="memories per step")
    retokenize.add_argument("--status", action="store_true", help="count, change nothing")


def cmd_retokenize(settings: Settings, args: argparse.Namespace, out: TextIO) -> int:
    if args.batch_size < 1:
        raise ConfigurationError(f"--batch-size must be at least 1, got {args.batch_size}")
    with engram_database(settings) as dsn:
        return asyncio.run(_retokenize(dsn, args, out))


async def _retokenize(dsn: str, args: argparse.Namespace, out: TextIO) -> int:
    pool = await create_pool(dsn, min_size=1, max_size=2)
    scope = f"bank {args.bank}" if args.bank else "all banks"
    try:
        async with pool.acquire() as conn:
            stale = await retokenize.stale_count(conn, args.bank)
        if args.status or stale == 0:
            out.write(f"{stale:,} memories to re-tokenise ({scope})\n")
            return 0
        out.write(f"re-tokenising {stale:,} memories ({scope})\n")
        checked = rewritten = 0
        after: str | None = None
        with ThreadPoolExecutor(1, thread_name_prefix="retokenize") as cpu:
            while True:
                batch = await retokenize.retokenize_batch(
                    pool, bank_id=args.bank, after_id=after, batch_size=args.batch_size, cpu=cpu
                )
                if batch.last_id is None:
                    break
                checked += batch.checked
                rewritten += batch.rewritten
                after = batch.last_id
                out.write(f"  {checked:,}/{stale:,} checked, {rewritten:,} rewritten\n")
                out.flush()
        out.write(f"done: {checked:,} memories checked, {rewritten:,} had new terms\n")
        return 0
    finally:
        await pool.close()
