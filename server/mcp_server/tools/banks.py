"""The bank tools: list, create, show, update, delete, and a bank's counts."""

from __future__ import annotations

from pydantic import Field

from server.mcp_server import format as fmt
from server.mcp_server.backend import Backend
from server.mcp_server.tools.spec import Args, NoArgs, ToolSpec, bank_path, tool


class CreateBankArgs(Args):
    name: str | None = None
    mission: str | None = Field(None, description="What this bank is for; guides extraction")


class UpdateBankArgs(CreateBankArgs):
    mcp_enabled_tools: list[str] | None = Field(
        None, description="Only these tools are exposed for the bank; [] or null: all"
    )


async def list_banks(api: Backend, bank: str, args: NoArgs) -> str:
    body = await api.call("GET", "/v1/default/banks", params={"limit": 1000})
    return fmt.page_text(body, "banks", fmt.bank_line, items_key="banks")


async def put_bank(api: Backend, bank: str, args: CreateBankArgs) -> str:
    body = args.model_dump(exclude_none=True)
    return fmt.bank_text(await api.call("PUT", bank_path(bank), body=body))


async def update_bank(api: Backend, bank: str, args: UpdateBankArgs) -> str:
    changes = args.model_dump(exclude_none=True)
    return fmt.bank_text(await api.call("PATCH", bank_path(bank), body=changes))


async def get_bank(api: Backend, bank: str, args: NoArgs) -> str:
    return fmt.bank_text(await api.call("GET", bank_path(bank, "/profile")))


async def delete_bank(api: Backend, bank: str, args: NoArgs) -> str:
    body = await api.call("DELETE", bank_path(bank))
    return str(body.get("message") or f"bank {bank} deleted")


async def get_bank_stats(api: Backend, bank: str, args: NoArgs) -> str:
    return fmt.stats_text(await api.call("GET", bank_path(bank, "/stats")))


TOOLS: tuple[ToolSpec, ...] = (
    tool(
        "list_banks",
        "List the memory banks (one per user, agent or project): id, name and mission.",
        NoArgs,
        list_banks,
        "read",
        manages_banks=True,
        takes_bank=False,
    ),
    tool(
        "create_bank",
        "Create a memory bank (or update its name and mission if it exists). "
        'Example: {"bank_id": "ana", "name": "Ana\'s assistant", "mission": "Remember Ana\'s '
        'projects and preferences"}',
        CreateBankArgs,
        put_bank,
        "admin",
        idempotent=True,
        manages_banks=True,
    ),
    tool(
        "get_bank",
        "Show a bank's name, mission and disposition.",
        NoArgs,
        get_bank,
        "read",
    ),
    tool(
        "update_bank",
        "Change a bank's name, mission, or which MCP tools it exposes (mcp_enabled_tools).",
        UpdateBankArgs,
        update_bank,
        "admin",
        idempotent=True,
        manages_banks=True,
    ),
    tool(
        "delete_bank",
        "Delete a bank and everything in it, for good. Only when the user asks for it.",
        NoArgs,
        delete_bank,
        "admin",
        destructive=True,
        manages_banks=True,
    ),
    tool(
        "get_bank_stats",
        "Counts for a bank: memories by type, documents, entities, links, pending work.",
        NoArgs,
        get_bank_stats,
        "read",
    ),
)
