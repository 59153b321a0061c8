"""`python -m server`: run the HTTP server (the supervisor passes the database and Temporal)."""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import uvicorn

from engine.db import migrate
from engine.embedding import embedder_identity
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
    # The database must fit the configured model before uvicorn starts: a refusal raised in
    # the app's lifespan would reach the terminal as uvicorn's traceback, not as one line.
    try:
        asyncio.run(migrate(settings.database_url, *embedder_identity(settings.embedding_model)))
    except ConfigurationError as exc:
        print(f"engram server: {exc}", file=sys.stderr)
        return 2

    @asynccontextmanager
    async def services() -> AsyncIterator[Services]:
        async with open_services(settings) as opened:
            yield opened

    app = create_app(services)
    config = uvicorn.Config(
        app,
        host=settings.api_host,
        port=settings.api_port,
        log_level="warning",
        lifespan="on",
    )
    server = uvicorn.Server(config)
    try:
        server.run()
    except ConfigurationError as exc:
        print(f"engram server: {exc}", file=sys.stderr)
        return 2
    return 0 if server.started else 1
