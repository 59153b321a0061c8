"""Graphs for visualising a bank: `GET .../graph` (memories and their links) and
`GET .../entities/graph` (entities and how often facts name them together)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from engine.errors import InvalidInput
from engine.store.banks import get_bank
from engine.store.graph import entity_graph, memory_graph
from engine.store.memories import Memory, MemoryFilter, TagsMatch
from server.http import (
    choice_param,
    int_param,
    iso,
    json_response,
    path_param,
    services_of,
    text_param,
    texts_param,
)
from server.routes.memories import FACT_TYPES, TAG_MODES, memory_item

MAX_GRAPH = 5000
LABEL_CHARS = 80


def memory_node(memory: Memory) -> dict[str, Any]:
    label = memory.text if len(memory.text) <= LABEL_CHARS else memory.text[:LABEL_CHARS] + "…"
    return {
        "id": memory.id,
        "label": label,
        "text": memory.text,
        "fact_type": memory.fact_type,
        "document_id": memory.document_id,
        "occurred_start": iso(memory.occurred_start),
        "mentioned_at": iso(memory.mentioned_at),
        "entities": memory.entities,
        "tags": memory.tags,
    }


async def memory_graph_route(request: Request) -> Response:
    bank_id = path_param(request, "bank_id")
    limit = int_param(request, "limit", 1000, high=MAX_GRAPH)
    if request.query_params.get("chunk_id"):
        raise InvalidInput("chunk_id", "is not supported; filter by document_id")
    tags_match: TagsMatch = choice_param(request, "tags_match", TAG_MODES) or "all_strict"  # type: ignore[assignment]
    where = MemoryFilter(
        fact_type=choice_param(request, "type", FACT_TYPES),
        document_id=text_param(request, "document_id"),
        text=text_param(request, "q"),
        tags=texts_param(request, "tags"),
        tags_match=tags_match,
    )
    async with services_of(request).pool.acquire() as conn:
        await get_bank(conn, bank_id)
        graph = await memory_graph(conn, bank_id, where, limit)
    return json_response(
        {
            "nodes": [memory_node(m) for m in graph.nodes],
            "edges": [
                {"source": e.source, "target": e.target, "type": e.link_type, "weight": e.weight}
                for e in graph.edges
            ],
            "table_rows": [memory_item(m) for m in graph.nodes],
            "total_units": graph.total_units,
            "limit": limit,
        }
    )


async def entity_graph_route(request: Request) -> Response:
    bank_id = path_param(request, "bank_id")
    limit = int_param(request, "limit", 1000, high=MAX_GRAPH)
    min_count = int_param(request, "min_count", 1, low=1, high=10**6)
    async with services_of(request).pool.acquire() as conn:
        await get_bank(conn, bank_id)
        graph = await entity_graph(conn, bank_id, limit, min_count)
    return json_response(
        {
            "nodes": [
                {
                    "id": n.id,
                    "label": n.canonical_name,
                    "kind": n.kind,
                    "mention_count": n.mention_count,
                }
                for n in graph.nodes
            ],
            "edges": [
                {"source": e.source, "target": e.target, "cooccurrence_count": e.count}
                for e in graph.edges
            ],
            "total_entities": graph.total_entities,
            "total_edges": graph.total_edges,
            "limit": limit,
        }
    )


def routes() -> list[Route]:
    base = "/v1/default/banks/{bank_id}"
    return [
        Route(base + "/graph", memory_graph_route, methods=["GET"]),
        # Before `.../entities/{entity_id}` so "graph" is not read as an entity id.
        Route(base + "/entities/graph", entity_graph_route, methods=["GET"]),
    ]
