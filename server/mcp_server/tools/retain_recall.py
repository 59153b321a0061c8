"""Storing and finding memories: retain, sync_retain, recall and reflect."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from engine.types import FactType
from server.mcp_server import format as fmt
from server.mcp_server.backend import Backend
from server.mcp_server.tools.spec import Args, Budget, ToolSpec, bank_path, tool


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


def item_of(args: RetainArgs) -> dict[str, Any]:
    return args.model_dump(exclude_none=True)


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


TOOLS: tuple[ToolSpec, ...] = (
    tool(
        "retain",
        "Store something worth remembering (a fact the user shared, a decision, a preference). "
        "Call it whenever the conversation reveals durable information. Returns at once with an "
        "operation id; the memory is searchable a few seconds later. "
        'Example: {"content": "Ana moved to Lisbon in March 2024", "context": "chat"}',
        RetainArgs,
        retain,
        "write",
    ),
    tool(
        "sync_retain",
        "Like retain, but waits until the memory is stored and searchable, and says how many "
        "facts it produced. Use it when the next step recalls what was just stored. "
        'Example: {"content": "The launch moved to June 3", "tags": ["project-x"]}',
        RetainArgs,
        sync_retain,
        "write",
    ),
    tool(
        "recall",
        "Search long-term memory. Call it before answering anything that may depend on what "
        "was said or learned earlier. Returns matching memories, one a line: "
        "[id] (type, date) text. "
        'Example: {"query": "Where does Ana live?", "budget": "mid", "types": ["world"]}',
        RecallArgs,
        recall,
        "read",
    ),
    tool(
        "reflect",
        "Answer a question by reasoning over memory (an LLM searches and synthesises). Slower "
        "than recall; use it for questions that need several memories combined. Returns the "
        'answer and the memories it used. Example: {"query": "What should I get Ana for her '
        'birthday?"}',
        ReflectArgs,
        reflect,
        "read",
    ),
)
