"""The MCP server over the tool table: multi-bank (every tool takes `bank_id`, plus bank
management) or pinned to one bank (no `bank_id`, no bank management), with a bank's
`mcp_enabled_tools` setting deciding which tools it exposes.

Streamable HTTP is served statelessly: each request gets its own low-level server and
transport, so nothing is opened in the app's lifespan and any worker process can answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from pydantic import ValidationError
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from engine.limits import MAX_BANK_ID_CHARS
from server.errors import MAX_ERRORS, clipped
from server.mcp_server.backend import Backend, ToolFailure
from server.mcp_server.tools import TOOLS, TOOLS_BY_NAME
from server.mcp_server.tools.spec import Scope as ToolScope
from server.mcp_server.tools.spec import ToolSpec, bank_path
from server.security import TRANSPORT_SCOPE_KEY

INSTRUCTIONS = (
    "Engram is long-term memory. Call recall before answering anything that may depend on "
    "earlier conversations; call retain when the user shares something worth remembering "
    "(facts, preferences, decisions, events with their dates)."
)
INTERNAL_BASE = "http://engram.internal"


class Forbidden(ToolFailure):
    pass


def authorize(caller: Mapping[str, Any] | None, bank_id: str, scope: ToolScope) -> None:
    """The one bank check every tool goes through, before it touches the bank.

    `caller` is the HTTP request's ASGI scope (None on stdio, where the process runs as its
    user and the API it calls checks its key). The security middleware leaves the request's
    `engine.auth.principal.Principal` in `caller["state"]["principal"]`: a bank it does not
    see is "not found" (as the routes answer), a scope it lacks is refused. `bank_id` "*"
    (list_banks) asks for nothing above the routes' own filtering.
    """
    if caller is None or bank_id == "*":
        return
    principal = caller.get("state", {}).get("principal")
    if principal is None:
        return
    if not principal.sees(bank_id):
        raise Forbidden(f"bank not found: {bank_id}")
    if not principal.allows(bank_id, scope):
        raise Forbidden(f"this key may not {scope} bank {bank_id!r}")


def input_schema(tool: ToolSpec, pinned: bool) -> dict[str, Any]:
    schema = tool.args.model_json_schema()
    schema.pop("title", None)
    if pinned or not tool.takes_bank:
        return schema
    properties = {"bank_id": {"type": "string", "description": "The memory bank"}}
    schema["properties"] = {**properties, **schema.get("properties", {})}
    schema["required"] = ["bank_id", *schema.get("required", [])]
    return schema


def mcp_tool(tool: ToolSpec, pinned: bool) -> types.Tool:
    return types.Tool(
        name=tool.name,
        description=tool.description,
        input_schema=input_schema(tool, pinned),
        annotations=types.ToolAnnotations(
            read_only_hint=tool.read_only,
            destructive_hint=tool.destructive,
            idempotent_hint=tool.idempotent,
            open_world_hint=False,
        ),
    )


def offered(pinned: bool) -> list[ToolSpec]:
    return [t for t in TOOLS if not (pinned and t.manages_banks)]


async def enabled_tools(api: Backend, bank_id: str) -> list[str] | None:
    """The bank's `mcp_enabled_tools` (None: all); an unknown bank exposes every tool, and
    the tools themselves then say the bank does not exist."""
    try:
        config = await api.call("GET", bank_path(bank_id, "/config"))
    except ToolFailure:
        return None
    names = config.get("config", {}).get("mcp_enabled_tools")
    return list(names) if names else None


def text_result(text: str, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=error)


def build_server(
    api: Backend, bank_id: str | None, caller: Mapping[str, Any] | None
) -> Server[Any]:
    pinned = bank_id is not None

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        tools = offered(pinned)
        if bank_id is not None:
            allowed = await enabled_tools(api, bank_id)
            if allowed is not None:
                tools = [t for t in tools if t.name in allowed]
        return types.ListToolsResult(tools=[mcp_tool(t, pinned) for t in tools])

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        tool = TOOLS_BY_NAME.get(params.name)
        if tool is None or tool not in offered(pinned):
            return text_result(f"unknown tool {params.name!r}", error=True)
        arguments = dict(params.arguments or {})
        bank = bank_id if bank_id is not None else arguments.pop("bank_id", None)
        if not tool.takes_bank:
            bank = "*"
        elif not isinstance(bank, str) or not bank.strip():
            return text_result("bank_id is required (the memory bank to use)", error=True)
        elif len(bank) > MAX_BANK_ID_CHARS:
            return text_result(f"bank_id is longer than {MAX_BANK_ID_CHARS} characters", error=True)
        try:
            args = tool.args.model_validate(arguments)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}"
                for e in exc.errors(include_url=False, include_input=False)[:MAX_ERRORS]
            )
            if exc.error_count() > MAX_ERRORS:
                problems += f"; and {exc.error_count() - MAX_ERRORS:,} more"
            return text_result(f"invalid arguments: {clipped(problems)}", error=True)
        try:
            authorize(caller, bank, tool.scope)
            if tool.takes_bank and tool.name != "create_bank":
                allowed = await enabled_tools(api, bank)
                if allowed is not None and tool.name not in allowed:
                    raise ToolFailure(
                        f"tool {tool.name} is disabled for bank {bank} (its mcp_enabled_tools)"
                    )
            return text_result(await tool.run(api, bank, args))
        except ToolFailure as exc:
            return text_result(clipped(str(exc)), error=True)

    return Server(
        "engram",
        version="0.1.0",
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


class MCPEndpoint:
    """`/mcp/` and `/mcp/{bank_id}/`: one stateless Streamable HTTP exchange per request. The
    tools call the same app in process, with the caller's credentials, so its middleware and
    routes apply to them as to any HTTP client."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        app: ASGIApp = scope["app"]
        bank_id = scope.get("path_params", {}).get("bank_id")
        forwarded = {
            key.decode("latin-1"): value.decode("latin-1")
            for key, value in scope["headers"]
            if key in (b"authorization", b"x-api-key")
        }
        transport = httpx.ASGITransport(app=_marked(app))
        async with httpx.AsyncClient(
            transport=transport, base_url=INTERNAL_BASE, headers=forwarded, timeout=None
        ) as client:
            server = build_server(Backend(client), bank_id, scope)
            manager = StreamableHTTPSessionManager(server, stateless=True, json_response=True)
            async with manager.run():
                await manager.handle_request(scope, receive, send)


def _marked(app: ASGIApp) -> ASGIApp:
    """The app, with each call marked as made by an MCP tool (for the audit's transport)."""

    async def call(scope: Scope, receive: Receive, send: Send) -> None:
        await app({**scope, TRANSPORT_SCOPE_KEY: "mcp"}, receive, send)

    return call


def mcp_routes() -> list[Route]:
    endpoint = MCPEndpoint()
    methods = ["GET", "POST", "DELETE"]
    return [
        Route(path, endpoint, methods=methods, include_in_schema=False)
        for path in ("/mcp", "/mcp/", "/mcp/{bank_id}", "/mcp/{bank_id}/")
    ]
