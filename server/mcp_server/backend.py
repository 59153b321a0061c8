"""What the tools call: the v1 HTTP API, in process for `/mcp/` (the same app, through its
middleware, so validation, errors and authentication are the routes' own) or over the network
for `engram mcp` on stdio."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import httpx


class ToolFailure(Exception):
    """A tool call the API refused; the message is what the model reads."""


def segment(value: str) -> str:
    """One path segment, percent-encoded (ids may hold spaces or slashes)."""
    return quote(value, safe="")


class Backend:
    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client

    async def call(
        self,
        method: str,
        path: str,
        *,
        body: dict[str, Any] | None = None,
        params: dict[str, Any] | None = None,
    ) -> Any:
        query = {k: v for k, v in (params or {}).items() if v is not None}
        try:
            response = await self.client.request(method, path, json=body, params=query)
        except httpx.InvalidURL as exc:
            raise ToolFailure(f"an argument is too long for the request ({exc})") from exc
        except httpx.TransportError as exc:  # `engram mcp` on stdio: the API is away
            raise ToolFailure(f"the Engram API did not answer: {exc!r}") from exc
        if response.status_code >= 400:
            raise ToolFailure(failure_message(response))
        try:
            return response.json()
        except ValueError as exc:
            raise ToolFailure(
                f"HTTP {response.status_code} from {method} {path} is not JSON"
            ) from exc


def failure_message(response: httpx.Response) -> str:
    try:
        data = response.json()
    except ValueError:
        return f"HTTP {response.status_code}: {response.text[:300]}"
    detail = data.get("detail") if isinstance(data, dict) else data
    field = data.get("field") if isinstance(data, dict) else None
    where = f" (field: {field})" if field else ""
    return f"{detail}{where}"
