"""The v1 API, one module per resource."""

from __future__ import annotations

from starlette.routing import BaseRoute

from server.routes import (
    audit,
    banks,
    directives,
    document_history,
    entities,
    extraction,
    files,
    graph,
    imports,
    insights,
    lifecycle,
    llm_log,
    memories,
    mental_models,
    observations,
    recall,
    reflect,
    retain,
    retry,
    transfer,
    unsupported,
    webhooks,
)


def api_routes() -> list[BaseRoute]:
    return [
        *banks.routes(),
        *retain.routes(),
        *retry.routes(),
        *recall.routes(),
        *graph.routes(),
        *extraction.routes(),
        *document_history.routes(),
        *entities.routes(),
        *memories.routes(),
        *lifecycle.routes(),
        *imports.routes(),
        *observations.routes(),
        *reflect.routes(),
        *mental_models.routes(),
        *audit.routes(),
        *directives.routes(),
        *files.routes(),
        *insights.routes(),
        *llm_log.routes(),
        *webhooks.routes(),
        *transfer.routes(),
        # Last: a real route for the same path and method wins over its placeholder.
        *unsupported.routes(),
    ]
