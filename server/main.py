"""`python -m server`: run the HTTP server (the supervisor passes the database and Temporal)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta

import asyncpg
import uvicorn

from engine.auth.audit import sweep_audit
from engine.auth.keys import active_key_count
from engine.chinese import default_segmenter
from engine.errors import ConfigurationError
from engine.settings import Settings
from server.app import create_app
from server.processes import serve_processes
from server.services import Services, open_services

log = logging.getLogger("engram.server")
# The audit retention sweep runs this often; one DELETE on an indexed range.
AUDIT_SWEEP_INTERVAL_S = 3600.0


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
        check_exposure(settings)
        if settings.api_processes > 1:
            return serve_processes(
                settings.api_processes, settings.api_host, settings.api_port, serve_on
            )
        return asyncio.run(_serve(settings))
    except ConfigurationError as exc:
        print(f"engram server: {exc}", file=sys.stderr)
        return 2


def serve_on(sock: socket.socket) -> None:
    """One of several server processes (server/processes.py), on the parent's socket."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s server %(levelname)s %(message)s")
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops us with SIGTERM
    try:
        code = asyncio.run(_serve(Settings.from_env(), sock))
    except ConfigurationError as exc:
        print(f"engram server: {exc}", file=sys.stderr)
        code = 2
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # as server/__main__.py: the Temporal runtime can abort in teardown


async def _serve(settings: Settings, sock: socket.socket | None = None) -> int:
    """Services first, then the port: whatever the configuration gets wrong (the model, its
    directory, a database filled by another model) surfaces as a ConfigurationError before
    uvicorn starts, and main() prints it as one line. Opened in the app's lifespan instead, it
    would reach the terminal as uvicorn's startup traceback."""
    async with open_services(settings) as opened, sweeping_audit(opened):
        async with opened.pool.acquire() as conn:
            log.info("%s", auth_summary(settings, await active_key_count(conn)))
        # jieba's dictionary loads in ~0.5 s (much longer on a loaded host): before the port
        # opens, not inside the first Chinese recall.
        await asyncio.to_thread(default_segmenter)

        @asynccontextmanager
        async def services() -> AsyncIterator[Services]:
            yield opened

        config = uvicorn.Config(
            create_app(services, settings.max_in_flight),
            host=settings.api_host,
            port=settings.api_port,
            log_level="warning",
            lifespan="on",
        )
        server = uvicorn.Server(config)
        await server.serve(sockets=[sock] if sock is not None else None)
        return 0 if server.started else 1


def check_exposure(settings: Settings) -> None:
    """Refuse to serve every bank to the network by accident."""
    if settings.security.auth == "" and not settings.loopback:
        raise ConfigurationError(
            f"ENGRAM_API_HOST={settings.api_host} is reachable from other machines and API keys "
            "are not required: set ENGRAM_AUTH=keys (keys: `engram keys create`), or "
            "ENGRAM_AUTH=off to serve without keys on purpose"
        )


def auth_summary(settings: Settings, active_keys: int) -> str:
    mode = settings.security.auth
    if mode == "off":
        return (
            f"authentication is OFF (ENGRAM_AUTH=off): anyone reaching {settings.api_host} "
            "can read and write every bank"
        )
    if mode == "keys" or active_keys:
        return f"API keys required ({active_keys} active; `engram keys create` makes one)"
    return (
        "open: no API key needed while bound to loopback and no key exists "
        "(ENGRAM_AUTH=keys requires keys)"
    )


@asynccontextmanager
async def sweeping_audit(services: Services) -> AsyncIterator[None]:
    """Delete audit entries older than the retention period, at start and then hourly."""

    async def sweep() -> None:
        retention = timedelta(days=services.settings.security.audit_retention_days)
        while True:
            try:
                async with services.pool.acquire() as conn:
                    removed = await sweep_audit(conn, datetime.now(UTC) - retention)
                if removed:
                    log.info("audit: %d entries past retention deleted", removed)
            except (asyncpg.PostgresError, OSError) as exc:
                log.warning("audit sweep failed, will retry: %s", exc)
            await asyncio.sleep(AUDIT_SWEEP_INTERVAL_S)

    task = asyncio.create_task(sweep())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
