"""`engram mcp`: the MCP server on stdin/stdout for desktop clients that spawn a process. The
tools call a running Engram's HTTP API (`--url`), the same routes `/mcp/` calls in process."""

from __future__ import annotations

import httpx
from mcp.server.stdio import stdio_server

from server.mcp_server.backend import Backend
from server.mcp_server.server import build_server
from server.security import TRANSPORT_HEADER


async def serve_stdio(url: str, bank_id: str | None, api_key: str | None) -> None:
    headers = {TRANSPORT_HEADER: "mcp"}
    if api_key:
        headers["authorization"] = f"Bearer {api_key}"
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=300) as client:
        server = build_server(Backend(client), bank_id, None)
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
