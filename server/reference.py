"""`/openapi.json` and `/docs`: the document built from the app's own routes, and a reference
page whose assets ship in the package (nothing from a CDN)."""

from __future__ import annotations

from importlib import resources

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from server.openapi import openapi_document

ASSETS = {"docs.js": "text/javascript", "docs.css": "text/css"}


def _asset(name: str) -> bytes:
    return resources.files("server").joinpath("static", name).read_bytes()


def reference_routes(version: str) -> list[Route]:
    async def document(request: Request) -> Response:
        return JSONResponse(openapi_document(request.app.routes, version))

    async def page(request: Request) -> Response:
        return Response(_asset("docs.html"), media_type="text/html; charset=utf-8")

    async def asset(request: Request) -> Response:
        name: str = request.path_params["name"]
        if name not in ASSETS:
            return JSONResponse({"detail": f"no asset {name}"}, status_code=404)
        return Response(_asset(name), media_type=ASSETS[name])

    return [
        Route("/openapi.json", document, methods=["GET"], include_in_schema=False),
        Route("/docs", page, methods=["GET"], include_in_schema=False),
        Route("/docs/{name}", asset, methods=["GET"], include_in_schema=False),
    ]
