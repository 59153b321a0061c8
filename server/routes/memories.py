"""Documents, chunks, memories and entities: the read side of what retain stored."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from engine.consolidation.observations import observation_sources
from engine.db import Connection
from engine.errors import InvalidInput
from engine.store.banks import get_bank
from engine.store.document_files import document_originals
from engine.store.documents import (
    ChunkRow,
    delete_document,
    get_chunk,
    get_document,
    list_chunks,
    list_documents,
    set_document_tags,
)
from engine.store.memories import (
    TIME_FIELDS,
    Memory,
    MemoryFilter,
    TagsMatch,
    clear_memories,
    get_entity,
    get_memory,
    list_entities,
    list_memories,
    memory_links,
)
from engine.validation import check_instant
from server.http import (
    choice_param,
    int_param,
    iso,
    json_response,
    parse_body,
    path_param,
    principal_of,
    services_of,
    text_param,
    texts_param,
    uuid_param,
)
from server.openapi import ApiRoute
from server.queries import MemoryListQuery, PageQuery
from server.responses import (
    ChunkResponse,
    DeleteDocumentResponse,
    DeleteResponse,
    DocumentResponse,
    EntityDetailResponse,
    EntityListResponse,
    ListChunksResponse,
    ListDocumentsResponse,
    ListMemoryUnitsResponse,
    UpdateDocumentResponse,
)
from server.routes.files import attachment_json
from server.routes.observations import observation_fields
from server.schemas import Request as Body

FACT_TYPES = ("world", "experience", "observation")
# Hindsight's curation states on the wire: 'valid' is an active fact and 'invalidated' an
# archived one; 'superseded' is Engram's (docs/lifecycle.md).
WIRE_STATES = {"active": "valid", "archived": "invalidated", "superseded": "superseded"}
STATES_FROM_WIRE = {
    "valid": "active",
    "active": "active",
    "invalidated": "archived",
    "archived": "archived",
    "superseded": "superseded",
}
TAG_MODES = ("any", "all", "any_strict", "all_strict", "exact")


def _date_param(request: Request, name: str) -> datetime | None:
    raw = text_param(request, name)
    if raw is None:
        return None
    try:
        value = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError as exc:
        raise InvalidInput(name, f"is not an ISO-8601 date or datetime: {raw!r}") from exc
    if value.tzinfo is None:
        value = value.replace(tzinfo=datetime.now().astimezone().tzinfo)
    return check_instant(value, name)


def memory_item(memory: Memory) -> dict[str, Any]:
    """A MemoryUnitListItem: `entities` is a comma-separated string on this route."""
    return {
        "id": memory.id,
        "text": memory.text,
        "context": memory.context,
        "date": iso(memory.occurred_start or memory.mentioned_at) or "",
        "fact_type": memory.fact_type,
        "document_id": memory.document_id,
        "chunk_id": memory.chunk_id,
        "mentioned_at": iso(memory.mentioned_at),
        "occurred_start": iso(memory.occurred_start),
        "occurred_end": iso(memory.occurred_end),
        "entities": ", ".join(memory.entities),
        "proof_count": memory.proof_count,
        "tags": memory.tags,
        "metadata": memory.metadata,
        "updated_at": iso(memory.updated_at),
        "created_at": iso(memory.created_at),
        "state": WIRE_STATES[memory.state],
        "importance": memory.importance,
        "strength": memory.strength,
        "access_count": memory.access_count,
        "last_accessed_at": iso(memory.last_accessed_at),
        "valid_from": iso(memory.valid_from),
        "valid_to": iso(memory.valid_to),
        "superseded_by": memory.superseded_by,
        "needs_correction": memory.needs_correction,
    }


async def list_memory_route(request: Request) -> Response:
    bank_id = path_param(request, "bank_id")
    limit = int_param(request, "limit", 100)
    offset = int_param(request, "offset", 0, high=10**9)
    start = _date_param(request, "start_date")
    end = _date_param(request, "end_date")
    time_field = choice_param(request, "time_field", TIME_FIELDS) or "created_at"
    tags_match: TagsMatch = choice_param(request, "tags_match", TAG_MODES) or "any"  # type: ignore[assignment]
    where = MemoryFilter(
        fact_type=choice_param(request, "type", FACT_TYPES),
        document_id=text_param(request, "document_id"),
        entity_id=uuid_param(request, "entity_id"),
        text=text_param(request, "q"),
        tags=texts_param(request, "tags"),
        tags_match=tags_match,
        time_field=time_field,
        start=start,
        end=end,
        state=STATES_FROM_WIRE.get(choice_param(request, "state", tuple(STATES_FROM_WIRE)) or ""),
    )
    async with services_of(request).pool.acquire() as conn:
        await get_bank(conn, bank_id)
        memories, total = await list_memories(conn, bank_id, where, limit, offset)
        observed = [m.id for m in memories if m.fact_type == "observation"]
        sources = await observation_sources(conn, bank_id, observed)
    return json_response(
        {
            "items": [
                {**memory_item(m), "source_memory_ids": sources[m.id]}
                if m.id in sources
                else memory_item(m)
                for m in memories
            ],
            "total": total,
            "limit": limit,
            "offset": offset,
        }
    )


async def get_memory_route(request: Request) -> Response:
    bank_id = path_param(request, "bank_id")
    memory_id = path_param(request, "memory_id")
    async with services_of(request).pool.acquire() as conn:
        await get_bank(conn, bank_id)
        memory = await get_memory(conn, bank_id, memory_id)
        links = await memory_links(conn, memory.id)
        observed = {}
        if memory.fact_type == "observation":
            observed = await observation_fields(conn, bank_id, memory.id)
    body = memory_item(memory)
    body.update(
        {
            "bank_id": bank_id,
            "type": memory.fact_type,
            "entities": memory.entities,
            "details": memory.details,
            "links": [
                {"memory_id": x.unit_id, "type": x.link_type, "weight": x.weight, "text": x.text}
                for x in links
            ],
            "history": [],
            **observed,
        }
    )
    return json_response(body)


async def clear_route(request: Request) -> Response:
    bank_id = path_param(request, "bank_id")
    fact_type = choice_param(request, "type", FACT_TYPES)
    async with services_of(request).pool.acquire() as conn:
        await get_bank(conn, bank_id)
        count = await clear_memories(conn, bank_id, fact_type)
    return json_response({"success": True, "message": "memories cleared", "deleted_count": count})


def chunk_json(chunk: ChunkRow) -> dict[str, Any]:
    return {
        "chunk_id": chunk.chunk_id,
        "document_id": chunk.document_id,
        "bank_id": chunk.bank_id,
        "chunk_index": chunk.chunk_index,
        "chunk_text": chunk.content,
        "created_at": iso(chunk.created_at),
    }


async def list_documents_route(request: Request) -> Response:
    bank_id = path_param(request, "bank_id")
    limit = int_param(request, "limit", 100)
    offset = int_param(request, "offset", 0, high=10**9)
    async with services_of(request).pool.acquire() as conn:
        await get_bank(conn, bank_id)
        documents, total = await list_documents(
            conn, bank_id, text_param(request, "q"), limit, offset
        )
    return json_response(
        {
            "items": [
                {
                    "id": d.document_id,
                    "bank_id": d.bank_id,
                    "content_hash": d.content_hash,
                    "created_at": iso(d.created_at),
                    "updated_at": iso(d.updated_at),
                    "text_length": len(d.content),
                    "memory_unit_count": d.fact_count,
                    "document_metadata": d.metadata,
                    "tags": d.tags,
                }
                for d in documents
            ],
            "total": total,
            "limit": limit,
            "offset": offset,
        }
    )


async def get_document_route(request: Request) -> Response:
    bank_id = path_param(request, "bank_id")
    document_id = path_param(request, "document_id")
    async with services_of(request).pool.acquire() as conn:
        await get_bank(conn, bank_id)
        d = await get_document(conn, bank_id, document_id)
        chunks, _ = await list_chunks(conn, bank_id, document_id, 1000, 0)
        facts, _ = await list_memories(
            conn, bank_id, MemoryFilter(document_id=document_id), 1000, 0
        )
        originals = await document_originals(conn, bank_id, document_id)
    return json_response(
        {
            "id": d.document_id,
            "bank_id": d.bank_id,
            "original_text": d.content,
            "content_hash": d.content_hash,
            "context": d.context,
            "created_at": iso(d.created_at),
            "updated_at": iso(d.updated_at),
            "mentioned_at": iso(d.mentioned_at),
            "memory_unit_count": d.fact_count,
            "nodes_by_fact_type": d.facts_by_type,
            "tags": d.tags,
            "document_metadata": d.metadata,
            "chunks": [chunk_json(c) for c in chunks],
            "memories": [memory_item(m) for m in facts],
            "attachments": [attachment_json(bank_id, o) for o in originals],
        }
    )


async def delete_document_route(request: Request) -> Response:
    bank_id = path_param(request, "bank_id")
    document_id = path_param(request, "document_id")
    async with services_of(request).pool.acquire() as conn:
        await get_bank(conn, bank_id)
        removed = await delete_document(conn, bank_id, document_id)
    return json_response(
        {
            "success": True,
            "message": f"document {document_id} deleted",
            "document_id": document_id,
            "memory_units_deleted": removed,
        }
    )


async def list_chunks_route(request: Request) -> Response:
    bank_id = path_param(request, "bank_id")
    limit = int_param(request, "limit", 100)
    offset = int_param(request, "offset", 0, high=10**9)
    async with services_of(request).pool.acquire() as conn:
        await get_bank(conn, bank_id)
        chunks, total = await list_chunks(
            conn, bank_id, path_param(request, "document_id"), limit, offset
        )
    return json_response(
        {"items": [chunk_json(c) for c in chunks], "total": total, "limit": limit, "offset": offset}
    )


async def get_chunk_route(request: Request) -> Response:
    async with services_of(request).pool.acquire() as conn:
        # Not in the path: the chunk is looked for in the caller's banks only.
        visible = principal_of(request).bank_id
        banks = None if visible is None else [visible]
        chunk = await get_chunk(conn, path_param(request, "chunk_id"), banks)
    return json_response(chunk_json(chunk))


async def list_entities_route(request: Request) -> Response:
    bank_id = path_param(request, "bank_id")
    limit = int_param(request, "limit", 100)
    offset = int_param(request, "offset", 0, high=10**9)
    async with services_of(request).pool.acquire() as conn:
        await get_bank(conn, bank_id)
        entities, total = await list_entities(conn, bank_id, limit, offset)
    return json_response(
        {
            "items": [
                {
                    "id": e.id,
                    "canonical_name": e.canonical_name,
                    "mention_count": e.mention_count,
                    "first_seen": iso(e.first_seen),
                    "last_seen": iso(e.last_seen),
                    "metadata": {"kind": e.kind, "aliases": e.aliases},
                }
                for e in entities
            ],
            "total": total,
            "limit": limit,
            "offset": offset,
        }
    )


async def entity_detail(conn: Connection, bank_id: str, entity_id: str) -> dict[str, Any]:
    """Hindsight's EntityDetailResponse, with the entity's facts (Engram's addition)."""
    entity = await get_entity(conn, bank_id, entity_id)
    facts, total = await list_memories(conn, bank_id, MemoryFilter(entity_id=entity.id), 100, 0)
    return {
        "id": entity.id,
        "canonical_name": entity.canonical_name,
        "mention_count": entity.mention_count,
        "first_seen": iso(entity.first_seen),
        "last_seen": iso(entity.last_seen),
        "metadata": {"kind": entity.kind, "aliases": entity.aliases},
        "observations": [
            {"text": m.text, "mentioned_at": iso(m.mentioned_at)}
            for m in facts
            if m.fact_type == "observation"
        ],
        "facts": [memory_item(m) for m in facts],
        "facts_total": total,
    }


async def get_entity_route(request: Request) -> Response:
    bank_id = path_param(request, "bank_id")
    async with services_of(request).pool.acquire() as conn:
        await get_bank(conn, bank_id)
        return json_response(await entity_detail(conn, bank_id, path_param(request, "entity_id")))


class UpdateDocumentIn(Body):
    tags: list[str] | None = None


async def update_document_route(request: Request) -> Response:
    """New tags for a document and its facts, without re-extraction. (Hindsight also
    re-consolidates observations built from those facts; Engram's keep their tags.)"""
    bank_id, document_id = path_param(request, "bank_id"), path_param(request, "document_id")
    body = await parse_body(request, UpdateDocumentIn)
    async with services_of(request).pool.acquire() as conn:
        await get_bank(conn, bank_id)
        changed = 0
        if body.tags is not None:
            tags = list(dict.fromkeys(body.tags))
            changed = await set_document_tags(conn, bank_id, document_id, tags)
        else:
            await get_document(conn, bank_id, document_id)
    return json_response({"success": True, "memory_units_updated": changed})


def routes() -> list[Route]:
    base = "/v1/default/banks/{bank_id}"
    return [
        ApiRoute(
            base + "/memories/list",
            list_memory_route,
            methods=["GET"],
            tag="memories",
            summary="List memories",
            query=MemoryListQuery,
            response=ListMemoryUnitsResponse,
        ),
        ApiRoute(
            base + "/memories",
            clear_route,
            methods=["DELETE"],
            tag="memories",
            summary="Delete all of a bank's memories",
            response=DeleteResponse,
        ),
        ApiRoute(
            base + "/memories/{memory_id}",
            get_memory_route,
            methods=["GET"],
            tag="memories",
            summary="One memory with its links",
        ),
        ApiRoute(
            base + "/documents",
            list_documents_route,
            methods=["GET"],
            tag="documents",
            summary="List documents",
            query=PageQuery,
            response=ListDocumentsResponse,
        ),
        # Document ids may contain "/" (a folder import names documents by relative path),
        # and Starlette decodes %2F before routing: the `path` converter takes them whole.
        ApiRoute(
            base + "/documents/{document_id:path}/chunks",
            list_chunks_route,
            methods=["GET"],
            tag="documents",
            summary="A document's chunks",
            query=PageQuery,
            response=ListChunksResponse,
        ),
        ApiRoute(
            base + "/documents/{document_id:path}",
            get_document_route,
            methods=["GET"],
            tag="documents",
            summary="One document",
            response=DocumentResponse,
        ),
        ApiRoute(
            base + "/documents/{document_id:path}",
            delete_document_route,
            methods=["DELETE"],
            tag="documents",
            summary="Delete a document and its memories",
            response=DeleteDocumentResponse,
        ),
        ApiRoute(
            base + "/documents/{document_id:path}",
            update_document_route,
            methods=["PATCH"],
            tag="documents",
            summary="Change a document's tags (and its facts'), without re-extraction",
            body=UpdateDocumentIn,
            response=UpdateDocumentResponse,
        ),
        ApiRoute(
            "/v1/default/chunks/{chunk_id}",
            get_chunk_route,
            methods=["GET"],
            tag="documents",
            summary="One chunk",
            response=ChunkResponse,
        ),
        ApiRoute(
            base + "/entities",
            list_entities_route,
            methods=["GET"],
            tag="entities",
            summary="List entities",
            query=PageQuery,
            response=EntityListResponse,
        ),
        ApiRoute(
            base + "/entities/{entity_id}",
            get_entity_route,
            methods=["GET"],
            tag="entities",
            summary="One entity with its facts",
            response=EntityDetailResponse,
        ),
    ]
