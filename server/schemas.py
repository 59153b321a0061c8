"""Request bodies of the Hindsight v1 wire format, validated with pydantic.

The reference client sends explicit nulls for unset optional fields: null means "not given".
Unknown keys are ignored so newer clients keep working.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

MAX_ITEMS_PER_REQUEST = 10_000
MAX_CONTENT_CHARS = 1_000_000
MAX_REQUEST_CHARS = 1_500_000  # Temporal payloads are capped at 2 MB; bulk goes through import


class Request(BaseModel):
    model_config = ConfigDict(extra="ignore")


class DispositionIn(Request):
    skepticism: Annotated[int, Field(ge=1, le=5)] | None = None
    literalism: Annotated[int, Field(ge=1, le=5)] | None = None
    empathy: Annotated[int, Field(ge=1, le=5)] | None = None


Trait = Annotated[int, Field(ge=1, le=5)]


class BankIn(Request):
    name: str | None = None
    mission: str | None = None
    reflect_mission: str | None = None
    background: str | None = None
    disposition: DispositionIn | None = None
    disposition_skepticism: Trait | None = None
    disposition_literalism: Trait | None = None
    disposition_empathy: Trait | None = None
    retain_mission: str | None = None
    extraction_mode: Literal["llm", "local", "none"] | None = None
    retain_extraction_mode: str | None = None
    retain_chunk_size: Annotated[int, Field(ge=200, le=100_000)] | None = None
    chunk_size: Annotated[int, Field(ge=200, le=100_000)] | None = None
    enable_observations: bool | None = None
    enable_entity_links: bool | None = None
    enable_semantic_links: bool | None = None
    enable_temporal_links: bool | None = None
    enable_causal_links: bool | None = None
    directives: list[str] | None = None
    mcp_enabled_tools: list[str] | None = None


class ConfigPatchIn(Request):
    updates: dict[str, Any]


class EntityHint(Request):
    text: str
    type: str | None = None


class TextBlock(Request):
    type: Literal["text"]
    text: str


class MemoryItemIn(Request):
    content: str | list[TextBlock]
    timestamp: str | None = None
    context: str | None = None
    metadata: dict[str, str] | None = None
    document_id: Annotated[str, Field(min_length=1, max_length=500)] | None = None
    entities: list[EntityHint | str] | None = None
    tags: list[str] | None = None
    update_mode: Literal["replace", "append"] | None = None

    @field_validator("content")
    @classmethod
    def _content(cls, value: str | list[TextBlock]) -> str | list[TextBlock]:
        text = value if isinstance(value, str) else "\n\n".join(b.text for b in value)
        if not text.strip():
            raise ValueError("must not be empty")
        if len(text) > MAX_CONTENT_CHARS:
            raise ValueError(f"is longer than {MAX_CONTENT_CHARS} characters")
        return value

    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return "\n\n".join(block.text for block in self.content)


class RetainIn(Request):
    items: Annotated[list[MemoryItemIn], Field(min_length=1, max_length=MAX_ITEMS_PER_REQUEST)]
    async_: bool = Field(default=False, alias="async")
    operation_id: Annotated[str, Field(min_length=1, max_length=200)] | None = None
    document_tags: list[str] | None = None

    @field_validator("items")
    @classmethod
    def _total_size(cls, items: list[MemoryItemIn]) -> list[MemoryItemIn]:
        if sum(len(item.text()) for item in items) > MAX_REQUEST_CHARS:
            raise ValueError(
                f"total content exceeds {MAX_REQUEST_CHARS} characters; use the import API"
            )
        return items
