"""The v1 API, one module per resource."""

from __future__ import annotations

from starlette.routing import BaseRoute

from server.routes import (
    audit,
    banks,
    graph,
    imports,
    lifecycle,
    memories,
    mental_models,
    observations,
    recall,
    reflect,
    retain,
)


def api_routes() -> list[BaseRoute]:
    return [
        *banks.routes(),
        *retain.routes(),
        *recall.routes(),
        *graph.routes(),
        *memories.routes(),
        *lifecycle.routes(),
        *imports.routes(),
        *observations.routes(),
        *reflect.routes(),
        *mental_models.routes(),
        *audit.routes(),
    ]
