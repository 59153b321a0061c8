"""Mental models: questions whose answers Engram keeps up to date from memory."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from server.mcp_server import format as fmt
from server.mcp_server.backend import Backend, segment
from server.mcp_server.tools.spec import Args, Id, NoArgs, ToolSpec, bank_path, tool


class MentalModelArgs(Args):
    mental_model_id: Id


class CreateMentalModelArgs(Args):
    name: str
    source_query: str = Field(description="The question the model's content answers")
    mental_model_id: Id | None = Field(None, description="lowercase letters, digits, hyphens")
    tags: list[str] | None = None
    max_tokens: Annotated[int, Field(ge=256, le=8192)] | None = None


class UpdateMentalModelArgs(Args):
    mental_model_id: Id
    name: str | None = None
    source_query: str | None = None
    tags: list[str] | None = None
    max_tokens: Annotated[int, Field(ge=256, le=8192)] | None = None


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


TOOLS: tuple[ToolSpec, ...] = (
    tool(
        "list_mental_models",
        "List mental models: standing summaries kept up to date from memory (id, name, query).",
        NoArgs,
        list_mental_models,
        "read",
    ),
    tool(
        "get_mental_model",
        "One mental model's current content. Cheaper than reflect for a recurring question.",
        MentalModelArgs,
        get_mental_model,
        "read",
    ),
    tool(
        "create_mental_model",
        "Create a mental model: a question whose answer Engram keeps up to date as memories "
        'arrive. Example: {"name": "Ana\'s preferences", "source_query": "What does Ana like '
        'and dislike?"}',
        CreateMentalModelArgs,
        create_mental_model,
        "write",
    ),
    tool(
        "update_mental_model",
        "Change a mental model's name, query, tags or size.",
        UpdateMentalModelArgs,
        update_mental_model,
        "write",
        idempotent=True,
    ),
    tool(
        "delete_mental_model",
        "Delete a mental model and its history, for good (only when the user asks).",
        MentalModelArgs,
        delete_mental_model,
        "write",
        destructive=True,
    ),
    tool(
        "refresh_mental_model",
        "Recompute a mental model's content from memory now (an operation).",
        MentalModelArgs,
        refresh_mental_model,
        "write",
    ),
    tool(
        "clear_mental_model",
        "Empty a mental model's content (it refills at the next refresh).",
        MentalModelArgs,
        clear_mental_model,
        "write",
        destructive=True,
    ),
)
