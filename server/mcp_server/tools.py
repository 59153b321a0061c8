"""The MCP tools: arguments (pydantic, which makes each input schema), a description written
for a model, hints, the scope a caller needs on the bank, and a run function that calls the v1
API through `Backend` and answers in compact text."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from engine.types import FactType
from server.mcp_server import format as fmt
from server.mcp_server.backend import Backend, segment

Scope = Literal["read", "write", "admin"]
Budget = Literal["low", "mid", "high"]
Limit = Annotated[int, Field(ge=1, le=200)]


class Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NoArgs(Args):
    pass


class RetainArgs(Args):
    content: str = Field(description="What to remember: a message, a note, a conversation turn")
    context: str | None = Field(None, description="Where it came from, e.g. 'chat with Ana'")
    timestamp: str | None = Field(
        None, description="When it happened (ISO-8601); default now; 'unset' for timeless facts"
    )
    document_id: str | None = Field(
        None, description="Groups items; retaining the same document_id again replaces it"
    )
    tags: list[str] | None = Field(None, description="Labels to filter recall by later")
    metadata: dict[str, str] | None = None


class RecallArgs(Args):
    query: str = Field(description="A natural-language question or topic")
    budget: Budget = Field("mid", description="How hard to search: low, mid or high")
    max_tokens: Annotated[int, Field(ge=1, le=100_000)] = Field(
        2048, description="Upper bound on the text returned"
    )
    types: list[FactType] | None = Field(
        None, description="Only these kinds: world, experience, observation"
    )
    tags: list[str] | None = None
    tags_match: Literal["any", "all", "any_strict", "all_strict", "exact"] | None = None
    query_timestamp: str | None = Field(
        None, description="'Now' for relative dates in the query (ISO-8601), e.g. 'last week'"
    )


class ReflectArgs(Args):
    query: str = Field(description="The question to answer from memory")
    context: str | None = Field(None, description="Extra context for the answer")
    budget: Budget = "mid"
    tags: list[str] | None = None


class CreateBankArgs(Args):
    name: str | None = None
    mission: str | None = Field(None, description="What this bank is for; guides extraction")


class UpdateBankArgs(CreateBankArgs):
    mcp_enabled_tools: list[str] | None = Field(
        None, description="Only these tools are exposed for the bank; [] or null: all"
    )


class ListMemoriesArgs(Args):
    type: FactType | None = None
    q: str | None = Field(None, description="Only memories whose text contains this")
    document_id: str | None = None
    limit: Limit = 20
    offset: Annotated[int, Field(ge=0)] = 0


class MemoryArgs(Args):
    memory_id: str


class PageArgs(Args):
    limit: Limit = 20
    offset: Annotated[int, Field(ge=0)] = 0


class DocumentArgs(Args):
    document_id: str


class ListOperationsArgs(Args):
    status: Literal["pending", "processing", "completed", "failed", "cancelled"] | None = None
    limit: Annotated[int, Field(ge=1, le=100)] = 20


class UpdateMemoryArgs(Args):
    memory_id: str
    text: str | None = Field(None, description="The corrected statement")
    tags: list[str] | None = None
    occurred_start: str | None = Field(None, description="ISO-8601 date or datetime")
    occurred_end: str | None = Field(None, description="ISO-8601 date or datetime")
    reason: str | None = Field(None, description="Why it changed, kept in the memory's history")


class InvalidateMemoryArgs(Args):
    memory_id: str
    reason: str | None = Field(None, description="Why it is no longer true")


class ForgetArgs(Args):
    memory_ids: list[str] | None = Field(None, description="Exact memories to erase")
    entity: str | None = Field(None, description="Erase every memory naming this entity")
    tags: list[str] | None = None
    document_id: str | None = None
    text: str | None = Field(None, description="Erase memories containing this text")
    start_date: str | None = Field(None, description="ISO-8601; with end_date, a date range")
    end_date: str | None = None
    dry_run: bool = Field(True, description="True (default): only list what would be erased")


class OperationArgs(Args):
    operation_id: str


class MentalModelArgs(Args):
    mental_model_id: str


class CreateMentalModelArgs(Args):
    name: str
    source_query: str = Field(description="The question the model's content answers")
    mental_model_id: str | None = Field(None, description="lowercase letters, digits, hyphens")
    tags: list[str] | None = None
    max_tokens: Annotated[int, Field(ge=256, le=8192)] | None = None


class UpdateMentalModelArgs(Args):
    mental_model_id: str
    name: str | None = None
    source_query: str | None = None
    tags: list[str] | None = None
    max_tokens: Annotated[int, Field(ge=256, le=8192)] | None = None


class TagsArgs(Args):
    q: str | None = Field(None, description="Wildcard filter, e.g. 'user:*'")
    limit: Limit = 50


class CreateDirectiveArgs(Args):
    name: str
    content: str = Field(description="The rule, e.g. 'Answer in metric units'")
    priority: int = Field(0, description="Higher is applied first")
    tags: list[str] | None = None


class DirectiveArgs(Args):
    directive_id: str


Run = Callable[[Backend, str, Any], Awaitable[str]]


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    args: type[Args]
    run: Run
    scope: Scope
    read_only: bool
    destructive: bool = False
    idempotent: bool = False
    manages_banks: bool = False  # only on the multi-bank endpoint
    takes_bank: bool = True  # False: works across banks (list_banks)


def bank_path(bank: str, rest: str = "") -> str:
    return f"/v1/default/banks/{segment(bank)}{rest}"


def item_of(args: RetainArgs) -> dict[str, Any]:
    return {k: v for k, v in args.model_dump().items() if v is not None}


async def retain(api: Backend, bank: str, args: RetainArgs) -> str:
    body = await api.call(
        "POST", bank_path(bank, "/memories"), body={"items": [item_of(args)], "async": True}
    )
    return (
        f"Queued for memory (operation {body['operation_id']}); it is searchable once the "
        "operation completes (get_operation). Use sync_retain to wait."
    )


async def sync_retain(api: Backend, bank: str, args: RetainArgs) -> str:
    body = await api.call("POST", bank_path(bank, "/memories"), body={"items": [item_of(args)]})
    return (
        f"Stored: {body.get('facts_added', 0)} new memories from {body.get('documents', 1)} "
        f"document(s) {', '.join(body.get('document_ids') or [])} "
        f"(operation {body['operation_id']})."
    )


async def recall(api: Backend, bank: str, args: RecallArgs) -> str:
    request: dict[str, Any] = {
        "query": args.query,
        "budget": args.budget,
        "max_tokens": args.max_tokens,
        "types": args.types,
        "tags": args.tags,
        "tags_match": args.tags_match,
        "query_timestamp": args.query_timestamp,
    }
    body = await api.call("POST", bank_path(bank, "/memories/recall"), body=request)
    return fmt.recall_text(body, args.query)


async def reflect(api: Backend, bank: str, args: ReflectArgs) -> str:
    request = {
        "query": args.query,
        "context": args.context,
        "budget": args.budget,
        "tags": args.tags,
    }
    return fmt.reflect_text(await api.call("POST", bank_path(bank, "/reflect"), body=request))


async def list_banks(api: Backend, bank: str, args: NoArgs) -> str:
    body = await api.call("GET", "/v1/default/banks", params={"limit": 1000})
    return fmt.page_text(body, "banks", fmt.bank_line, items_key="banks")


async def put_bank(api: Backend, bank: str, args: CreateBankArgs) -> str:
    body = {k: v for k, v in args.model_dump().items() if v is not None}
    return fmt.bank_text(await api.call("PUT", bank_path(bank), body=body))


async def update_bank(api: Backend, bank: str, args: UpdateBankArgs) -> str:
    changes = {
        k: v for k, v in args.model_dump(exclude={"mcp_enabled_tools"}).items() if v is not None
    }
    if args.mcp_enabled_tools is not None:
        changes["mcp_enabled_tools"] = args.mcp_enabled_tools
    return fmt.bank_text(await api.call("PATCH", bank_path(bank), body=changes))


async def get_bank(api: Backend, bank: str, args: NoArgs) -> str:
    return fmt.bank_text(await api.call("GET", bank_path(bank, "/profile")))


async def delete_bank(api: Backend, bank: str, args: NoArgs) -> str:
    body = await api.call("DELETE", bank_path(bank))
    return str(body.get("message") or f"bank {bank} deleted")


async def get_bank_stats(api: Backend, bank: str, args: NoArgs) -> str:
    return fmt.stats_text(await api.call("GET", bank_path(bank, "/stats")))


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


def model_path(bank: str, model_id: str = "", rest: str = "") -> str:
    tail = f"/{segment(model_id)}" if model_id else ""
    return bank_path(bank, f"/mental-models{tail}{rest}")


async def list_mental_models(api: Backend, bank: str, args: NoArgs) -> str:
    body = await api.call("GET", model_path(bank), params={"limit": 100})
    return fmt.page_text(body, "mental models", fmt.mental_model_line)


async def get_mental_model(api: Backend, bank: str, args: MentalModelArgs) -> str:
    return fmt.mental_model_text(await api.call("GET", model_path(bank, args.mental_model_id)))


async def create_mental_model(api: Backend, bank: str, args: CreateMentalModelArgs) -> str:
    request = {
        "id": args.mental_model_id,
        "name": args.name,
        "source_query": args.source_query,
        "tags": args.tags,
        "max_tokens": args.max_tokens,
    }
    body = await api.call(
        "POST", model_path(bank), body={k: v for k, v in request.items() if v is not None}
    )
    return (
        f"Created mental model {body['mental_model_id']}; its first refresh is operation "
        f"{body['operation_id']}."
    )


async def update_mental_model(api: Backend, bank: str, args: UpdateMentalModelArgs) -> str:
    changes = args.model_dump(exclude={"mental_model_id"})
    body = await api.call("PATCH", model_path(bank, args.mental_model_id), body=changes)
    return fmt.mental_model_text(body)


async def delete_mental_model(api: Backend, bank: str, args: MentalModelArgs) -> str:
    await api.call("DELETE", model_path(bank, args.mental_model_id))
    return f"Deleted mental model {args.mental_model_id}."


async def refresh_mental_model(api: Backend, bank: str, args: MentalModelArgs) -> str:
    body = await api.call("POST", model_path(bank, args.mental_model_id, "/refresh"), body={})
    return f"Refresh of {args.mental_model_id} started (operation {body['operation_id']})."


async def clear_mental_model(api: Backend, bank: str, args: MentalModelArgs) -> str:
    await api.call("POST", model_path(bank, args.mental_model_id, "/clear"), body={})
    return f"Cleared the content of mental model {args.mental_model_id}."


async def list_tags(api: Backend, bank: str, args: TagsArgs) -> str:
    body = await api.call("GET", bank_path(bank, "/tags"), params=args.model_dump())
    return fmt.page_text(body, "tags", lambda t: f"- {t['tag']} ({t['count']} memories)")


async def list_directives(api: Backend, bank: str, args: NoArgs) -> str:
    body = await api.call("GET", bank_path(bank, "/directives"), params={"limit": 200})
    return fmt.page_text(body, "directives", fmt.directive_line)


async def create_directive(api: Backend, bank: str, args: CreateDirectiveArgs) -> str:
    body = await api.call("POST", bank_path(bank, "/directives"), body=args.model_dump())
    return "Created " + fmt.directive_line(body)[2:]


async def delete_directive(api: Backend, bank: str, args: DirectiveArgs) -> str:
    await api.call("DELETE", bank_path(bank, f"/directives/{segment(args.directive_id)}"))
    return f"Deleted directive {args.directive_id}."


def _tool(
    name: str,
    description: str,
    args: type[Args],
    run: Any,
    scope: Scope,
    *,
    destructive: bool = False,
    idempotent: bool = False,
    manages_banks: bool = False,
    takes_bank: bool = True,
) -> ToolSpec:
    return ToolSpec(
        name,
        description,
        args,
        run,
        scope,
        scope == "read",
        destructive,
        idempotent or scope == "read",
        manages_banks,
        takes_bank,
    )


TOOLS: tuple[ToolSpec, ...] = (
    _tool(
        "retain",
        "Store something worth remembering (a fact the user shared, a decision, a preference). "
        "Call it whenever the conversation reveals durable information. Returns at once with an "
        "operation id; the memory is searchable a few seconds later. "
        'Example: {"content": "Ana moved to Lisbon in March 2024", "context": "chat"}',
        RetainArgs,
        retain,
        "write",
    ),
    _tool(
        "sync_retain",
        "Like retain, but waits until the memory is stored and searchable, and says how many "
        "facts it produced. Use it when the next step recalls what was just stored. "
        'Example: {"content": "The launch moved to June 3", "tags": ["project-x"]}',
        RetainArgs,
        sync_retain,
        "write",
    ),
    _tool(
        "recall",
        "Search long-term memory. Call it before answering anything that may depend on what "
        "was said or learned earlier. Returns matching memories, one a line: "
        "[id] (type, date) text. "
        'Example: {"query": "Where does Ana live?", "budget": "mid", "types": ["world"]}',
        RecallArgs,
        recall,
        "read",
    ),
    _tool(
        "reflect",
        "Answer a question by reasoning over memory (an LLM searches and synthesises). Slower "
        "than recall; use it for questions that need several memories combined. Returns the "
        'answer and the memories it used. Example: {"query": "What should I get Ana for her '
        'birthday?"}',
        ReflectArgs,
        reflect,
        "read",
    ),
    _tool(
        "list_banks",
        "List the memory banks (one per user, agent or project): id, name and mission.",
        NoArgs,
        list_banks,
        "read",
        manages_banks=True,
        takes_bank=False,
    ),
    _tool(
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
    _tool(
        "get_bank",
        "Show a bank's name, mission and disposition.",
        NoArgs,
        get_bank,
        "read",
    ),
    _tool(
        "update_bank",
        "Change a bank's name, mission, or which MCP tools it exposes (mcp_enabled_tools).",
        UpdateBankArgs,
        update_bank,
        "admin",
        idempotent=True,
        manages_banks=True,
    ),
    _tool(
        "delete_bank",
        "Delete a bank and everything in it, for good. Only when the user asks for it.",
        NoArgs,
        delete_bank,
        "admin",
        destructive=True,
        manages_banks=True,
    ),
    _tool(
        "get_bank_stats",
        "Counts for a bank: memories by type, documents, entities, links, pending work.",
        NoArgs,
        get_bank_stats,
        "read",
    ),
    _tool(
        "list_memories",
        "Browse stored memories, newest first, optionally by type, text or document. Returns "
        'one a line: [id] (type, date) text. Example: {"type": "observation", "limit": 10}',
        ListMemoriesArgs,
        list_memories,
        "read",
    ),
    _tool(
        "get_memory",
        "One memory by id (from recall or list_memories), with its context, entities and document.",
        MemoryArgs,
        get_memory,
        "read",
    ),
    _tool(
        "update_memory",
        "Correct a memory that is wrong or out of date (its text, tags or dates). The memory is "
        "re-indexed and the old version kept in its history. Returns the corrected memory. "
        'Example: {"memory_id": "…", "text": "Ana moved to Porto in May 2025"}',
        UpdateMemoryArgs,
        update_memory,
        "write",
    ),
    _tool(
        "invalidate_memory",
        "Mark a memory as no longer true without erasing it (recall stops returning it; its "
        "history keeps it). Use it when the user says something stopped being the case. "
        'Example: {"memory_id": "…", "reason": "Ana left Globex"}',
        InvalidateMemoryArgs,
        invalidate_memory,
        "write",
        destructive=True,
    ),
    _tool(
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
    _tool(
        "list_documents",
        "List the documents memories were extracted from (id, memory count, size, date).",
        PageArgs,
        list_documents,
        "read",
    ),
    _tool(
        "get_document",
        "One document's text and the memories extracted from it.",
        DocumentArgs,
        get_document,
        "read",
    ),
    _tool(
        "delete_document",
        "Delete a document and every memory extracted from it.",
        DocumentArgs,
        delete_document,
        "write",
        destructive=True,
    ),
    _tool(
        "list_operations",
        "List background operations (retains, imports, refreshes) with their status.",
        ListOperationsArgs,
        list_operations,
        "read",
    ),
    _tool(
        "get_operation",
        "One operation's status: pending, processing, completed, failed (with the reason) or "
        'cancelled. Example: {"operation_id": "5f0c..."}',
        OperationArgs,
        get_operation,
        "read",
    ),
    _tool(
        "cancel_operation",
        "Cancel a pending or running operation (a retain or import still queued, say). Returns "
        "whether the cancellation was requested.",
        OperationArgs,
        cancel_operation,
        "write",
        destructive=True,
    ),
    _tool(
        "list_tags",
        "List the tags memories carry, most used first, to pick tags for recall filters. "
        'Example: {"q": "project:*"}',
        TagsArgs,
        list_tags,
        "read",
    ),
    _tool(
        "list_directives",
        "List the bank's directives: standing rules reflect follows (id, priority, rule).",
        NoArgs,
        list_directives,
        "read",
    ),
    _tool(
        "create_directive",
        "Add a standing rule for reflect's answers, when the user states how answers should "
        'be. Example: {"name": "Units", "content": "Always use metric units", "priority": 5}',
        CreateDirectiveArgs,
        create_directive,
        "write",
    ),
    _tool(
        "delete_directive",
        "Remove a directive by id (list_directives shows the ids); reflect stops following it.",
        DirectiveArgs,
        delete_directive,
        "write",
        destructive=True,
    ),
    _tool(
        "list_mental_models",
        "List mental models: standing summaries kept up to date from memory (id, name, query).",
        NoArgs,
        list_mental_models,
        "read",
    ),
    _tool(
        "get_mental_model",
        "One mental model's current content. Cheaper than reflect for a recurring question.",
        MentalModelArgs,
        get_mental_model,
        "read",
    ),
    _tool(
        "create_mental_model",
        "Create a mental model: a question whose answer Engram keeps up to date as memories "
        'arrive. Example: {"name": "Ana\'s preferences", "source_query": "What does Ana like '
        'and dislike?"}',
        CreateMentalModelArgs,
        create_mental_model,
        "write",
    ),
    _tool(
        "update_mental_model",
        "Change a mental model's name, query, tags or size.",
        UpdateMentalModelArgs,
        update_mental_model,
        "write",
        idempotent=True,
    ),
    _tool(
        "delete_mental_model",
        "Delete a mental model and its history, for good (only when the user asks).",
        MentalModelArgs,
        delete_mental_model,
        "write",
        destructive=True,
    ),
    _tool(
        "refresh_mental_model",
        "Recompute a mental model's content from memory now (an operation).",
        MentalModelArgs,
        refresh_mental_model,
        "write",
    ),
    _tool(
        "clear_mental_model",
        "Empty a mental model's content (it refills at the next refresh).",
        MentalModelArgs,
        clear_mental_model,
        "write",
        destructive=True,
    ),
)

TOOLS_BY_NAME = {tool.name: tool for tool in TOOLS}
