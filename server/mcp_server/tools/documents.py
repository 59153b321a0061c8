"""The documents memories were extracted from: list, show, delete."""

from __future__ import annotations

from server.mcp_server import format as fmt
from server.mcp_server.backend import Backend, segment
from server.mcp_server.tools.spec import Args, Id, PageArgs, ToolSpec, bank_path, tool


class DocumentArgs(Args):
    document_id: Id


async def list_documents(api: Backend, bank: str, args: PageArgs) -> str:
    body = await api.call("GET", bank_path(bank, "/documents"), params=args.model_dump())
    return fmt.page_text(body, "documents", fmt.document_line)


async def get_document(api: Backend, bank: str, args: DocumentArgs) -> str:
    path = bank_path(bank, f"/documents/{segment(args.document_id)}")
    return fmt.document_text(await api.call("GET", path))


async def delete_document(api: Backend, bank: str, args: DocumentArgs) -> str:
    path = bank_path(bank, f"/documents/{segment(args.document_id)}")
    body = await api.call("DELETE", path)
    removed = body.get("memory_units_deleted", 0)
    return f"Deleted document {args.document_id} and its {removed} memories."


TOOLS: tuple[ToolSpec, ...] = (
    tool(
        "list_documents",
        "List the documents memories were extracted from (id, memory count, size, date).",
        PageArgs,
        list_documents,
        "read",
    ),
    tool(
        "get_document",
        "One document's text and the memories extracted from it.",
        DocumentArgs,
        get_document,
        "read",
    ),
    tool(
        "delete_document",
        "Delete a document and every memory extracted from it.",
        DocumentArgs,
        delete_document,
        "write",
        destructive=True,
    ),
)
