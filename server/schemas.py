"""Request bodies of the Hindsight v1 wire format, validated with pydantic.

The reference client sends explicit nulls for unset optional fields: null means "not given".
Unknown keys are ignored so newer clients keep working. Sizes are bounded by
engine/limits.py (a field over its limit is a 422 naming it); text and numbers were already
checked by `engine.validation.check_json` when the body was read.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from engine.limits import (
    MAX_CONTENT_CHARS,
    MAX_CONTEXT_CHARS,
    MAX_DIRECTIVE_CHARS,
    MAX_DIRECTIVES,
    MAX_DOCUMENT_ID_CHARS,
    MAX_ENTITY_HINT_CHARS,
    MAX_ENTITY_HINTS,
    MAX_ITEMS_PER_REQUEST,
    MAX_METADATA_ENTRIES,
    MAX_METADATA_KEY_CHARS,
    MAX_METADATA_VALUE_CHARS,
    MAX_MISSION_CHARS,
    MAX_NAME_CHARS,
    MAX_OPERATION_ID_CHARS,
    MAX_TAG_CHARS,
    MAX_TAGS,
)

Mission = Annotated[str, Field(max_length=MAX_MISSION_CHARS)]
Tag = Annotated[str, Field(max_length=MAX_TAG_CHARS)]
Tags = Annotated[list[Tag], Field(max_length=MAX_TAGS)]
OperationId = Annotated[str, Field(min_length=1, max_length=MAX_OPERATION_ID_CHARS)]


class Request(BaseModel):
    model_config = ConfigDict(extra="ignore")


class DispositionIn(Request):
    skepticism: Annotated[int, Field(ge=1, le=5)] | None = None
    literalism: Annotated[int, Field(ge=1, le=5)] | None = None
    empathy: Annotated[int, Field(ge=1, le=5)] | None = None


Trait = Annotated[int, Field(ge=1, le=5)]


class BankIn(Request):
    name: Annotated[str, Field(max_length=MAX_NAME_CHARS)] | None = None
    mission: Mission | None = None
    reflect_mission: Mission | None = None
    background: Mission | None = None
    disposition: DispositionIn | None = None
    disposition_skepticism: Trait | None = None
    disposition_literalism: Trait | None = None
    disposition_empathy: Trait | None = None
    retain_mission: Mission | None = None
    extraction_mode: Literal["llm", "local", "none"] | None = None
    retain_extraction_mode: str | None = None
    retain_chunk_size: Annotated[int, Field(ge=200, le=100_000)] | None = None
    chunk_size: Annotated[int, Field(ge=200, le=100_000)] | None = None
    enable_observations: bool | None = None
    enable_entity_links: bool | None = None
    enable_semantic_links: bool | None = None
    enable_temporal_links: bool | None = None
    enable_causal_links: bool | None = None
    directives: (
        Annotated[
            list[Annotated[str, Field(max_length=MAX_DIRECTIVE_CHARS)]],
            Field(max_length=MAX_DIRECTIVES),
        ]
        | None
    ) = None
    lifecycle_preset: str | None = None
    lifecycle: dict[str, Any] | None = None
    mcp_enabled_tools: list[str] | None = None


class ConfigPatchIn(Request):
    updates: dict[str, Any]


HintText = Annotated[str, Field(max_length=MAX_ENTITY_HINT_CHARS)]


class EntityHint(Request):
    text: HintText
    type: str | None = None


class TextBlock(Request):
    type: Literal["text"]
    text: str


DocumentId = Annotated[str, Field(min_length=1, max_length=MAX_DOCUMENT_ID_CHARS)]


class MemoryItemIn(Request):
    content: str | list[TextBlock]
    timestamp: Annotated[str, Field(max_length=100)] | None = None
    context: Annotated[str, Field(max_length=MAX_CONTEXT_CHARS)] | None = None
    metadata: (
        Annotated[
            dict[
                Annotated[str, Field(max_length=MAX_METADATA_KEY_CHARS)],
                Annotated[str, Field(max_length=MAX_METADATA_VALUE_CHARS)],
            ],
            Field(max_length=MAX_METADATA_ENTRIES),
        ]
        | None
    ) = None
    document_id: Annotated[str, Field(min_length=1, max_length=MAX_DOCUMENT_ID_CHARS)] | None = None
    entities: Annotated[list[EntityHint | HintText], Field(max_length=MAX_ENTITY_HINTS)] | None = (
        None
    )
    tags: Tags | None = None
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
    operation_id: OperationId | None = None
    document_tags: Tags | None = None
