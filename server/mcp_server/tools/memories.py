"""Browsing and correcting single memories, and erasing them (forget)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from engine.types import FactType
from server.mcp_server import format as fmt
from server.mcp_server.backend import Backend, segment
from server.mcp_server.tools.spec import Args, Id, Limit, QueryText, ToolSpec, bank_path, tool


class ListMemoriesArgs(Args):
    type: FactType | None = None
    q: QueryText | None = Field(None, description="Only memories whose text contains this")
    document_id: Id | None = None
    limit: Limit = 20
    offset: Annotated[int, Field(ge=0)] = 0


class MemoryArgs(Args):
    memory_id: Id


class UpdateMemoryArgs(Args):
    memory_id: Id
    text: str | None = Field(None, description="The corrected statement")
    tags: list[str] | None = None
    occurred_start: str | None = Field(None, description="ISO-8601 date or datetime")
    occurred_end: str | None = Field(None, description="ISO-8601 date or datetime")
    reason: str | None = Field(None, description="Why it changed, kept in the memory's history")
    entities: list[str] | None = Field(
        None,
        description="Replace the people, places and things the memory names (e.g. "
        '["Ana", "Porto"]); omitted: kept, or found again in a corrected text',
    )
    resolve_entities: bool = Field(
        True,
        description="True (default): match each name to a known entity as retain does, so "
        '"Ana" can join "Ana Silva"; false: take the names literally, a new entity for any '
        "name not already known exactly",
    )


class InvalidateMemoryArgs(Args):
    memory_id: Id
    reason: str | None = Field(None, description="Why it is no longer true")


class ForgetArgs(Args):
    memory_ids: list[Id] | None = Field(None, description="Exact memories to erase")
    entity: str | None = Field(None, description="Erase every memory naming this entity")
    tags: list[str] | None = None
    document_id: Id | None = None
    text: str | None = Field(None, description="Erase memories containing this text")
    start_date: str | None = Field(None, description="ISO-8601; with end_date, a date range")
    end_date: str | None = None
    dry_run: bool = Field(True, description="True (default): only list what would be erased")


async def list_memories(api: Backend, bank: str, args: ListMemoriesArgs) -> str:
    body = await api.call("GET", bank_path(bank, "/memories/list"), params=args.model_dump())
    return fmt.page_text(body, "memories", fmt.fact_line)


async def get_memory(api: Backend, bank: str, args: MemoryArgs) -> str:
    return fmt.memory_text(
        await api.call("GET", bank_path(bank, f"/memories/{segment(args.memory_id)}"))
    )


async def update_memory(api: Backend, bank: str, args: UpdateMemoryArgs) -> str:
    change = args.model_dump(exclude={"memory_id"}, exclude_none=True)
    path = bank_path(bank, f"/memories/{segment(args.memory_id)}")
    return "Updated:\n" + fmt.memory_text(await api.call("PATCH", path, body=change))


async def invalidate_memory(api: Backend, bank: str, args: InvalidateMemoryArgs) -> str:
    change = {"state": "invalidated", "reason": args.reason or "invalidated through MCP"}
    path = bank_path(bank, f"/memories/{segment(args.memory_id)}")
    await api.call("PATCH", path, body=change)
    return f"Memory {args.memory_id} is marked no longer true (kept in its history)."


async def forget(api: Backend, bank: str, args: ForgetArgs) -> str:
    body = await api.call("POST", bank_path(bank, "/forget"), body=args.model_dump())
    memories = body.get("memories") or []
    verb = "Would erase" if body.get("dry_run") else "Erased"
    lines = [f"{verb} {len(memories)} memories:"]
    lines += [f"- [{m['id']}] {m['text']}" for m in memories[:50]]
    if len(memories) > 50:
        lines.append(f"(and {len(memories) - 50} more)")
    return "\n".join(lines)


TOOLS: tuple[ToolSpec, ...] = (
    tool(
        "list_memories",
        "Browse stored memories, newest first, optionally by type, text or document. Returns "
        'one a line: [id] (type, date) text. Example: {"type": "observation", "limit": 10}',
        ListMemoriesArgs,
        list_memories,
        "read",
    ),
    tool(
        "get_memory",
        "One memory by id (from recall or list_memories), with its context, entities and document.",
        MemoryArgs,
        get_memory,
        "read",
    ),
    tool(
        "update_memory",
        "Correct a memory that is wrong or out of date (its text, tags, dates or the entities "
        "it names). The memory is re-indexed and the old version kept in its history. Returns "
        "the corrected memory. "
        'Example: {"memory_id": "…", "text": "Ana moved to Porto in May 2025"}',
        UpdateMemoryArgs,
        update_memory,
        "write",
    ),
    tool(
        "invalidate_memory",
        "Mark a memory as no longer true without erasing it (recall stops returning it; its "
        "history keeps it). Use it when the user says something stopped being the case. "
        'Example: {"memory_id": "…", "reason": "Ana left Globex"}',
        InvalidateMemoryArgs,
        invalidate_memory,
        "write",
        destructive=True,
    ),
    tool(
        "forget",
        "Erase memories completely (the user asked to forget something, or a right-to-erasure "
        "request): by ids, entity, tags, document, text or date range. Runs as a dry run unless "
        "dry_run is false, and lists what it erases. "
        'Example: {"entity": "Rex", "dry_run": false}',
        ForgetArgs,
        forget,
        "write",
        destructive=True,
    ),
)
