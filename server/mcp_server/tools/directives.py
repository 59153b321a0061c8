"""Directives: the standing rules reflect follows."""

from __future__ import annotations

from pydantic import Field

from server.mcp_server import format as fmt
from server.mcp_server.backend import Backend, segment
from server.mcp_server.tools.spec import Args, Id, NoArgs, ToolSpec, bank_path, tool


class CreateDirectiveArgs(Args):
    name: str
    content: str = Field(description="The rule, e.g. 'Answer in metric units'")
    priority: int = Field(0, description="Higher is applied first")
    tags: list[str] | None = None


class DirectiveArgs(Args):
    directive_id: Id


async def list_directives(api: Backend, bank: str, args: NoArgs) -> str:
    body = await api.call("GET", bank_path(bank, "/directives"), params={"limit": 200})
    return fmt.page_text(body, "directives", fmt.directive_line)


async def create_directive(api: Backend, bank: str, args: CreateDirectiveArgs) -> str:
    body = await api.call("POST", bank_path(bank, "/directives"), body=args.model_dump())
    return "Created " + fmt.directive_line(body)[2:]


async def delete_directive(api: Backend, bank: str, args: DirectiveArgs) -> str:
    await api.call("DELETE", bank_path(bank, f"/directives/{segment(args.directive_id)}"))
    return f"Deleted directive {args.directive_id}."


TOOLS: tuple[ToolSpec, ...] = (
    tool(
        "list_directives",
        "List the bank's directives: standing rules reflect follows (id, priority, rule).",
        NoArgs,
        list_directives,
        "read",
    ),
    tool(
        "create_directive",
        "Add a standing rule for reflect's answers, when the user states how answers should "
        'be. Example: {"name": "Units", "content": "Always use metric units", "priority": 5}',
        CreateDirectiveArgs,
        create_directive,
        "write",
    ),
    tool(
        "delete_directive",
        "Remove a directive by id (list_directives shows the ids); reflect stops following it.",
        DirectiveArgs,
        delete_directive,
        "write",
        destructive=True,
    ),
)
