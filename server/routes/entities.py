"""`POST .../entities/{id}/regenerate` (Hindsight's deprecated regenerate_entity_observations).

Engram's entity observations are the consolidated observations linked to the entity, so
regenerating recounts the entity from its facts, clears the observations built from them
(engine/consolidation/observations.py) and runs the bank's consolidation to rebuild them —
the local, deterministic path without an LLM key — answering once that run has finished.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from temporalio.client import WorkflowFailureError

from engine.consolidation.observations import clear_entity_observations
from engine.errors import OperationFailed
from engine.store.banks import get_bank
from server.http import json_response, path_param, services_of
from server.openapi import ApiRoute
from server.responses import EntityDetailResponse
from server.routes.memories import entity_detail
from server.routes.observations import start_consolidation


async def regenerate_entity_route(request: Request) -> Response:
    """Hindsight's regenerate_entity_observations: the entity's counts recomputed from its
    facts, the observations built from them cleared and consolidated again (locally without
    an LLM key, deterministic), and the entity's detail once that run has finished."""
    bank_id, entity_id = path_param(request, "bank_id"), path_param(request, "entity_id")
    services = services_of(request)
    async with services.pool.acquire() as conn:
        bank = await get_bank(conn, bank_id)
        cleared = await clear_entity_observations(conn, bank_id, entity_id)
    services.recall.token_cache.discard(cleared)
    if bank.config.enable_observations:
        workflow_id = await start_consolidation(services, bank_id)
        try:
            await services.temporal.get_workflow_handle(workflow_id).result()
        except WorkflowFailureError as exc:
            raise OperationFailed(workflow_id, f"consolidation failed: {exc.cause}") from exc
    async with services.pool.acquire() as conn:
        return json_response(await entity_detail(conn, bank_id, entity_id))


def routes() -> list[Route]:
    return [
        ApiRoute(
            "/v1/default/banks/{bank_id}/entities/{entity_id}/regenerate",
            regenerate_entity_route,
            methods=["POST"],
            tag="entities",
            summary="Recount an entity and rebuild the observations made from its facts",
            response=EntityDetailResponse,
        )
    ]
