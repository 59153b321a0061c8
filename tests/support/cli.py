"""Running the `engram` command line from an async test."""

from __future__ import annotations

import asyncio

from engram.cli import main


async def engram(*argv: str) -> int:
    """The CLI's main() in a thread, so the test's loop keeps serving the API."""
    return await asyncio.to_thread(main, list(argv))
