"""Background operations (retains, imports, refreshes): list, show, cancel."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from server.mcp_server import format as fmt
from server.mcp_server.backend import Backend, segment
from server.mcp_server.tools.spec import Args, Id, ToolSpec, bank_path, tool


class ListOperationsArgs(Args):
    status: Literal["pending", "processing", "completed", "failed", "cancelled"] | None = None
    limit: Annotated[int, Field(ge=1, le=100)] = 20


class OperationArgs(Args):
    operation_id: Id


async def list_operations(api: Backend, bank: str, args: ListOperationsArgs) -> str:
    body = await api.call("GET", bank_path(bank, "/operations"), params=args.model_dump())
    return fmt.page_text(body, "operations", fmt.operation_line, items_key="operations")


async def get_operation(api: Backend, bank: str, args: OperationArgs) -> str:
    path = bank_path(bank, f"/operations/{segment(args.operation_id)}")
    return fmt.operation_line(await api.call("GET", path))[2:]


async def cancel_operation(api: Backend, bank: str, args: OperationArgs) -> str:
    path = bank_path(bank, f"/operations/{segment(args.operation_id)}")
    body = await api.call("DELETE", path)
    return f"Operation {args.operation_id}: {body.get('message', 'cancellation requested')}."


TOOLS: tuple[ToolSpec, ...] = (
    tool(
        "list_operations",
        "List background operations (retains, imports, refreshes) with their status.",
        ListOperationsArgs,
        list_operations,
        "read",
    ),
    tool(
        "get_operation",
        "One operation's status: pending, processing, completed, failed (with the reason) or "
        'cancelled. Example: {"operation_id": "5f0c..."}',
        OperationArgs,
        get_operation,
        "read",
    ),
    tool(
        "cancel_operation",
        "Cancel a pending or running operation (a retain or import still queued, say). Returns "
        "whether the cancellation was requested.",
        OperationArgs,
        cancel_operation,
        "write",
        destructive=True,
    ),
)
