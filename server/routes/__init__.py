"""The v1 API, one module per resource."""

from __future__ import annotations

from starlette.routing import BaseRoute

from server.routes import banks, memories, retain


def api_routes() -> list[BaseRoute]:
    return [*banks.routes(), *retain.routes(), *memories.routes()]
