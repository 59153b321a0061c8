"""`POST .../memories/dry-run-extract`: what retain would extract from a text, nothing stored.

The options default to the bank's (mode, chunk size); the body overrides them for this call
only, so a candidate configuration can be compared with the current one. Local extraction
runs on the server's CPU pool; LLM extraction calls the model from this process, logged in
the LLM request log like the health check's call (server/routes/llm_log.py).
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import Field, field_validator
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from engine.errors import InvalidInput
from engine.extraction.llm import LLMExtractor
from engine.extraction.local import LocalExtractor
from engine.limits import MAX_CONTENT_CHARS, MAX_CONTEXT_CHARS, MAX_ENTITY_HINTS
from engine.llm import LLMClient, Usage, llm_scope
from engine.retain.dry_run import ChunkExtract, DryRunResult, as_fact, dry_run_extract
from engine.retain.known_names import known_han_names
from engine.retain.options import extraction_mode
from engine.store.banks import EXTRACTION_MODES, MAX_CHUNK_SIZE, MIN_CHUNK_SIZE, Bank, get_bank
from engine.store.llm_requests import LLMRequestLog
from engine.types import ExtractedFact, ItemContext
from server.http import iso, json_response, parse_body, path_param, services_of
from server.lifecycle_responses import DryRunExtractionResult
from server.openapi import ApiRoute
from server.retain import parse_timestamp
from server.schemas import Request as Body
from server.schemas import TextBlock
from server.services import Services

# Hindsight's prompt options that Engram's extractors have no equivalent for: a value other
# than null is refused (naming the field) rather than silently ignored.
UNSUPPORTED_OPTIONS = (
    "strategy",
    "retain_custom_instructions",
    "retain_extract_causal_links",
    "entity_labels",
    "entities_allow_free_form",
    "llm_output_language",
)


class DryRunExtractIn(Body):
    """Hindsight's DryRunExtractRequest, plus the item fields retain takes (metadata and
    entity hints reach the extractor as they do in retain)."""

    content: str | list[TextBlock]
    context: Annotated[str, Field(max_length=MAX_CONTEXT_CHARS)] | None = None
    timestamp: str | None = Field(
        default=None, description="ISO 8601; relative dates resolve against it (default: now)"
    )
    agent_name: str | None = Field(default=None, description="Deprecated: the speaker")
    retain_mission: str | None = None
    retain_extraction_mode: str | None = Field(
        default=None, description="llm, local or none (default: the bank's)"
    )
    retain_chunk_size: Annotated[int, Field(ge=MIN_CHUNK_SIZE, le=MAX_CHUNK_SIZE)] | None = None
    retain_custom_instructions: str | None = None
    retain_extract_causal_links: bool | None = None
    entity_labels: list[Any] | None = None
    entities_allow_free_form: bool | None = None
    llm_output_language: str | None = None
    strategy: str | None = None
    metadata: dict[str, str] | None = None
    entities: Annotated[list[str], Field(max_length=MAX_ENTITY_HINTS)] | None = None

    @field_validator("content")
    @classmethod
    def _content(cls, value: str | list[TextBlock]) -> str | list[TextBlock]:
        text = value if isinstance(value, str) else "\n\n".join(b.text for b in value)
        if len(text) > MAX_CONTENT_CHARS:
            raise ValueError(f"is longer than {MAX_CONTENT_CHARS} characters")
        return value

    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return "\n\n".join(block.text for block in self.content)


def _mode(body: DryRunExtractIn, bank: Bank, services: Services) -> str:
    mode = body.retain_extraction_mode
    if mode is None:
        return extraction_mode(bank, services.settings)
    if mode not in EXTRACTION_MODES:
        raise InvalidInput(
            "retain_extraction_mode", f"must be one of {', '.join(EXTRACTION_MODES)}"
        )
    if mode == "llm" and not services.settings.llm.configured:
        raise InvalidInput(
            "retain_extraction_mode", "'llm' but no LLM key is configured (ENGRAM_LLM_API_KEY)"
        )
    return mode


def fact_json(chunk_index: int, fact: ExtractedFact) -> dict[str, Any]:
    return {
        "chunk_index": chunk_index,
        "text": fact.text,
        "fact_type": fact.fact_type,
        "occurred_start": iso(fact.occurred_start),
        "occurred_end": iso(fact.occurred_end),
        "entities": [e.name for e in fact.entities],
    }


async def _run(
    services: Services, bank_id: str, mode: str, body: DryRunExtractIn, item: ItemContext
) -> DryRunResult:
    chunk_size = body.retain_chunk_size or 0
    hints = body.entities or []
    if mode == "none":
        return await dry_run_extract(body.text(), item, chunk_size, as_fact, hints)
    if mode == "local":
        async with services.pool.acquire() as conn:
            known = await known_han_names(conn, bank_id)
        local = LocalExtractor().with_known_names(known)
        loop = asyncio.get_running_loop()

        async def local_extract(text: str, ctx: ItemContext) -> tuple[list[ExtractedFact], Usage]:
            facts = await loop.run_in_executor(services.cpu, local.extract, text, ctx)
            return facts, Usage()

        return await dry_run_extract(body.text(), item, chunk_size, local_extract, hints)
    async with LLMClient(services.settings.llm, LLMRequestLog(services.pool)) as client:
        llm = LLMExtractor(client)

        async def llm_extract(text: str, ctx: ItemContext) -> tuple[list[ExtractedFact], Usage]:
            with llm_scope(bank_id, "dry_run_extract"):
                found = await llm.extract_with_usage(text, ctx)
            return found.facts, found.usage

        extract: ChunkExtract = llm_extract
        return await dry_run_extract(body.text(), item, chunk_size, extract, hints)


async def dry_run_extract_route(request: Request) -> Response:
    bank_id = path_param(request, "bank_id")
    body = await parse_body(request, DryRunExtractIn)
    for name in UNSUPPORTED_OPTIONS:
        if getattr(body, name) is not None:
            raise InvalidInput(name, "is not supported by Engram's extractors; leave it null")
    services = services_of(request)
    async with services.pool.acquire() as conn:
        bank = await get_bank(conn, bank_id)
    mode = _mode(body, bank, services)
    if body.retain_chunk_size is None:
        body = body.model_copy(update={"retain_chunk_size": bank.config.chunk_size})
    item = ItemContext(
        mentioned_at=parse_timestamp(body.timestamp, "timestamp", datetime.now(UTC)),
        context=body.context or "",
        speaker=body.agent_name or None,
        metadata=dict(body.metadata or {}),
    )
    result = await _run(services, bank_id, mode, body, item)
    usage = result.usage
    return json_response(
        {
            "facts": [fact_json(index, fact) for index, fact in result.facts],
            "chunks": [{"text": text, "fact_count": n} for text, n in result.chunks],
            "usage": {
                "input_tokens": usage.prompt_tokens,
                "output_tokens": usage.completion_tokens,
                "total_tokens": usage.total_tokens,
                "cached_tokens": 0,
                "thoughts_tokens": 0,
            },
            "extraction_mode": mode,
        }
    )


def routes() -> list[BaseRoute]:
    return [
        ApiRoute(
            "/v1/default/banks/{bank_id}/memories/dry-run-extract",
            dry_run_extract_route,
            methods=["POST"],
            tag="memories",
            summary="Preview the facts retain would extract from a text (nothing is stored)",
            body=DryRunExtractIn,
            response=DryRunExtractionResult,
        )
    ]
