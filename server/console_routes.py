"""The console: static files from `server/console/`, served by this app at `/console/`.

The pages are plain ES modules that call the public v1 API, so they work the same against a
remote Engram. `Cache-Control: no-cache` makes browsers revalidate after an upgrade instead of
mixing old and new modules.
"""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

CONSOLE_DIR = Path(__file__).resolve().parent / "console"


class ConsoleFiles(StaticFiles):
    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        response.headers["Cache-Control"] = "no-cache"
        return response


async def to_console(request: Request) -> Response:
    return RedirectResponse(request.url.replace(path="/console/"), status_code=307)


def console_routes() -> list[BaseRoute]:
    return [
        # Redirects to the console's pages, which are not part of the API's document.
        Route("/", to_console, methods=["GET"], include_in_schema=False),
        Route("/console", to_console, methods=["GET"], include_in_schema=False),
        Mount("/console", app=ConsoleFiles(directory=CONSOLE_DIR, html=True), name="console"),
    ]
