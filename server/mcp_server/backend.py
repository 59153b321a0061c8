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
        response = await self.client.request(method, path, json=body, params=query)
        if response.status_code >= 400:
            raise ToolFailure(failure_message(response))
        return response.json()


def failure_message(response: httpx.Response) -> str:
    try:
        data = response.json()
    except ValueError:
        return f"HTTP {response.status_code}: {response.text[:300]}"
    detail = data.get("detail") if isinstance(data, dict) else data
    field = data.get("field") if isinstance(data, dict) else None
    where = f" (field: {field})" if field else ""
    return f"{detail}{where}"
