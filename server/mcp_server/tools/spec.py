"""What every tool is made of: its arguments (a pydantic model, which makes the input
schema), a description written for a model, hints, the scope a caller needs on the bank, and a
run function that calls the v1 API through `Backend` and answers in compact text."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from engine.limits import MAX_DOCUMENT_ID_CHARS, MAX_QUERY_CHARS
from server.mcp_server.backend import Backend, segment

Scope = Literal["read", "write", "admin"]
Budget = Literal["low", "mid", "high"]
Limit = Annotated[int, Field(ge=1, le=200)]
# An id a tool puts in a request path: not blank (an empty one would name the collection,
# not an item) and short enough for any URL; the API checks the rest.
Id = Annotated[str, Field(min_length=1, max_length=MAX_DOCUMENT_ID_CHARS, pattern=r"\S")]
# Text a tool sends as a query parameter.
QueryText = Annotated[str, Field(max_length=MAX_QUERY_CHARS)]


class Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NoArgs(Args):
    pass


class PageArgs(Args):
    limit: Limit = 20
    offset: Annotated[int, Field(ge=0)] = 0


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


def tool(
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
