"""`python -m server`: run the HTTP server (the supervisor passes the database and Temporal)."""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import uvicorn

from engine.errors import ConfigurationError
from engine.settings import Settings
from server.app import create_app
from server.services import Services, open_services


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s server %(levelname)s %(message)s")
    try:
        settings = Settings.from_env()
    except ConfigurationError as exc:
        print(f"engram server: {exc}", file=sys.stderr)
        return 2
    if not settings.database_url:
        print("engram server: ENGRAM_DATABASE_URL is not set", file=sys.stderr)
        return 2
    try:
        return asyncio.run(_serve(settings))
    except ConfigurationError as exc:
        print(f"engram server: {exc}", file=sys.stderr)
        return 2


async def _serve(settings: Settings) -> int:
    """Services first, then the port: whatever the configuration gets wrong (the model, its
    directory, a database filled by another model) surfaces as a ConfigurationError before
    uvicorn starts, and main() prints it as one line. Opened in the app's lifespan instead, it
    would reach the terminal as uvicorn's startup traceback."""
    async with open_services(settings) as opened:

        @asynccontextmanager
        async def services() -> AsyncIterator[Services]:
            yield opened

        config = uvicorn.Config(
            create_app(services),
            host=settings.api_host,
            port=settings.api_port,
            log_level="warning",
            lifespan="on",
        )
        server = uvicorn.Server(config)
        await server.serve()
        return 0 if server.started else 1
