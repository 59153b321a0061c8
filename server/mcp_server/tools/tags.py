"""The tags memories carry, for recall filters."""

from __future__ import annotations

from pydantic import Field

from server.mcp_server import format as fmt
from server.mcp_server.backend import Backend
from server.mcp_server.tools.spec import Args, Limit, QueryText, ToolSpec, bank_path, tool


class TagsArgs(Args):
    q: QueryText | None = Field(None, description="Wildcard filter, e.g. 'user:*'")
    limit: Limit = 50


async def list_tags(api: Backend, bank: str, args: TagsArgs) -> str:
    body = await api.call("GET", bank_path(bank, "/tags"), params=args.model_dump())
    return fmt.page_text(body, "tags", lambda t: f"- {t['tag']} ({t['count']} memories)")


TOOLS: tuple[ToolSpec, ...] = (
    tool(
        "list_tags",
        "List the tags memories carry, most used first, to pick tags for recall filters. "
        'Example: {"q": "project:*"}',
        TagsArgs,
        list_tags,
        "read",
    ),
)
