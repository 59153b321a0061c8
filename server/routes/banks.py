"""Banks: list, create or update, profile, stats, config, delete."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.service import RPCError

from activities.schedules import drop_schedule
from engine.errors import InvalidInput
from engine.lifecycle.policy import DEFAULT_PRESET, PRESETS
from engine.mental_models.store import bank_schedule_ids
from engine.store.banks import (
    Bank,
    BankConfig,
    bank_stats,
    delete_bank,
    get_bank,
    list_banks,
    put_bank,
    reset_bank_config,
)
from engine.store.insights import detailed_stats
from engine.store.operations import open_workflow_ids
from server.http import (
    int_param,
    iso,
    json_response,
    parse_body,
    path_param,
    principal_of,
    services_of,
)
from server.lifecycle import delete_lifecycle_schedule, ensure_lifecycle_schedule
from server.mcp_server.tools import TOOLS_BY_NAME
from server.openapi import ApiRoute
from server.queries import PageQuery
from server.responses import (
    BankConfigResponse,
    BankListResponse,
    BankProfileResponse,
    BankStatsResponse,
    DeleteResponse,
    LifecyclePresetsResponse,
)
from server.routes.retain import WIRE_STATUS
from server.schemas import BankIn, ConfigPatchIn
from workflows.consolidation import consolidation_workflow_id

# How long deleting a bank waits for its cancelled workflows to close before it deletes anyway.
STOP_WAIT_S = 10.0
# Hindsight's extraction modes mapped to ours: verbatim modes store chunks as they are; the
# others are LLM styles, which fall back to the server default (llm with a key, else local).
HINDSIGHT_MODES = {"verbatim": "none", "chunks": "none", "concise": "", "verbose": "", "custom": ""}


def disposition_json(bank: Bank) -> dict[str, int]:
    d = bank.config.disposition
    return {"skepticism": d.skepticism, "literalism": d.literalism, "empathy": d.empathy}


def profile_json(bank: Bank) -> dict[str, Any]:
    return {
        "bank_id": bank.bank_id,
        "name": bank.name,
        "mission": bank.mission,
        "background": bank.mission,
        "disposition": disposition_json(bank),
        "config": bank.config.to_json(),
        "created_at": iso(bank.created_at),
        "updated_at": iso(bank.updated_at),
    }


def config_changes(body: BankIn) -> dict[str, Any]:
    changes: dict[str, Any] = {}
    disposition: dict[str, int] = {}
    if body.disposition is not None:
        disposition.update(body.disposition.model_dump(exclude_none=True))
    for trait in ("skepticism", "literalism", "empathy"):
        value = getattr(body, f"disposition_{trait}")
        if value is not None:
            disposition[trait] = value
    if disposition:
        changes["disposition"] = disposition
    if body.retain_extraction_mode is not None:
        if body.retain_extraction_mode not in HINDSIGHT_MODES:
            raise InvalidInput(
                "retain_extraction_mode", f"must be one of {', '.join(HINDSIGHT_MODES)}"
            )
        changes["extraction_mode"] = HINDSIGHT_MODES[body.retain_extraction_mode]
    if body.extraction_mode is not None:
        changes["extraction_mode"] = body.extraction_mode
    unknown = sorted(set(body.mcp_enabled_tools or ()) - set(TOOLS_BY_NAME))
    if unknown:
        raise InvalidInput("mcp_enabled_tools", f"unknown tools: {', '.join(unknown)}")
    chunk_size = body.chunk_size or body.retain_chunk_size
    if chunk_size is not None:
        changes["chunk_size"] = chunk_size
    for key in (
        "retain_mission",
        "enable_observations",
        "enable_entity_links",
        "enable_semantic_links",
        "enable_temporal_links",
        "enable_causal_links",
        "directives",
        "lifecycle_preset",
        "lifecycle",
        "mcp_enabled_tools",
    ):
        value = getattr(body, key)
        if value is not None:
            changes[key] = value
    return changes


async def put(request: Request) -> Response:
    bank_id = path_param(request, "bank_id")
    body = await parse_body(request, BankIn)
    mission = body.mission if body.mission is not None else body.reflect_mission
    if mission is None:
        mission = body.background
    async with services_of(request).pool.acquire() as conn:
        bank = await put_bank(
            conn, bank_id, name=body.name, mission=mission, config_changes=config_changes(body)
        )
    await ensure_lifecycle_schedule(services_of(request), bank)
    return json_response(profile_json(bank))


async def profile(request: Request) -> Response:
    async with services_of(request).pool.acquire() as conn:
        bank = await get_bank(conn, path_param(request, "bank_id"))
    return json_response(profile_json(bank))


async def list_all(request: Request) -> Response:
    limit = int_param(request, "limit", 100)
    offset = int_param(request, "offset", 0, high=10**9)
    async with services_of(request).pool.acquire() as conn:
        banks = await list_banks(conn)
    principal = principal_of(request)
    banks = [b for b in banks if principal.sees(b.bank_id)]
    page = banks[offset : offset + limit]
    return json_response(
        {
            "banks": [
                {
                    "bank_id": b.bank_id,
                    "name": b.name,
                    "mission": b.mission,
                    "disposition": disposition_json(b),
                    "created_at": iso(b.created_at),
                    "updated_at": iso(b.updated_at),
                }
                for b in page
            ],
            "total": len(banks),
            "limit": limit,
            "offset": offset,
        }
    )


async def stop_work(client: Client, workflow_ids: list[str]) -> None:
    """Cancel the workflows and wait (up to STOP_WAIT) for them to close, so a consolidation
    does not write into the rows the delete is removing (a deadlock) or record its operation
    after the bank is gone. A workflow already closed or unknown is skipped."""
    handles = [client.get_workflow_handle(workflow_id) for workflow_id in workflow_ids]
    for handle in handles:
        with contextlib.suppress(RPCError):
            await handle.cancel()

    async def closed(handle: WorkflowHandle[Any, Any]) -> None:
        with contextlib.suppress(WorkflowFailureError, RPCError):
            await handle.result()

    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.gather(*(closed(h) for h in handles)), STOP_WAIT_S)


async def delete(request: Request) -> Response:
    bank_id = path_param(request, "bank_id")
    services = services_of(request)
    async with services.pool.acquire() as conn:
        await get_bank(conn, bank_id)
        running = await open_workflow_ids(conn, bank_id)
    await stop_work(services.temporal, [*running, consolidation_workflow_id(bank_id)])
    async with services.pool.acquire() as conn:
        schedules = await bank_schedule_ids(conn, bank_id)
        await delete_bank(conn, bank_id)
    # The bank's mental-model and report schedules go with it (a leftover one would also
    # delete itself when it next fires, but should not linger in the Temporal UI).
    for schedule_id in schedules:
        await drop_schedule(services.temporal, schedule_id)
    await delete_lifecycle_schedule(services.temporal, bank_id)
    return json_response({"success": True, "message": f"bank {bank_id} deleted"})


async def stats(request: Request) -> Response:
    bank_id = path_param(request, "bank_id")
    async with services_of(request).pool.acquire() as conn:
        await get_bank(conn, bank_id)
        s = await bank_stats(conn, bank_id)
        d = await detailed_stats(conn, bank_id)
    operations = d.operations_by_status
    return json_response(
        {
            "bank_id": bank_id,
            "total_nodes": s.facts + s.observations,
            "total_links": s.links,
            "total_documents": s.documents,
            "total_entities": s.entities,
            "total_observations": s.observations,
            "nodes_by_fact_type": d.nodes_by_fact_type,
            "links_by_link_type": d.links_by_link_type,
            "links_by_fact_type": d.links_by_fact_type,
            "links_breakdown": {
                "by_link_type": d.links_by_link_type,
                "by_fact_type": d.links_by_fact_type,
            },
            "pending_operations": operations.get("pending", 0) + operations.get("running", 0),
            "failed_operations": operations.get("failed", 0),
            "operations_by_status": {WIRE_STATUS.get(k, k): v for k, v in operations.items()},
            "last_memory_write_at": iso(d.last_memory_write_at),
            "last_consolidated_at": iso(d.last_consolidated_at),
            "pending_consolidation": d.pending_consolidation,
            "failed_consolidation": 0,
        }
    )


def config_json(bank: Bank) -> dict[str, Any]:
    overrides = bank.config.to_json()
    defaults = BankConfig().to_json()
    return {
        "bank_id": bank.bank_id,
        "config": overrides,
        "overrides": {k: v for k, v in overrides.items() if defaults.get(k) != v},
    }


async def get_config(request: Request) -> Response:
    async with services_of(request).pool.acquire() as conn:
        bank = await get_bank(conn, path_param(request, "bank_id"))
    return json_response(config_json(bank))


async def patch_config(request: Request) -> Response:
    body = await parse_body(request, ConfigPatchIn)
    patch = BankIn.model_validate(body.updates)
    bank_id = path_param(request, "bank_id")
    async with services_of(request).pool.acquire() as conn, conn.transaction():
        await get_bank(conn, bank_id)  # configuring is not creating: an unknown bank is a 404
        bank = await put_bank(conn, bank_id, config_changes=config_changes(patch))
    await ensure_lifecycle_schedule(services_of(request), bank)
    return json_response(config_json(bank))


async def reset_config(request: Request) -> Response:
    bank_id = path_param(request, "bank_id")
    async with services_of(request).pool.acquire() as conn:
        bank = await reset_bank_config(conn, bank_id)
    return json_response(config_json(bank))


async def lifecycle_presets(request: Request) -> Response:
    """The lifecycle presets a bank can name (`lifecycle_preset`) and every setting of each,
    which a bank's `lifecycle` overrides one by one (engine/lifecycle/policy.py)."""
    return json_response(
        {
            "default": DEFAULT_PRESET,
            "presets": {name: policy.to_json() for name, policy in PRESETS.items()},
        }
    )


def routes() -> list[Route]:
    base = "/v1/default/banks"
    return [
        ApiRoute(
            base,
            list_all,
            methods=["GET"],
            tag="banks",
            summary="List banks",
            query=PageQuery,
            response=BankListResponse,
        ),
        ApiRoute(
            base + "/{bank_id}",
            put,
            methods=["PUT", "PATCH"],
            tag="banks",
            summary="Create or update a bank",
            body=BankIn,
            response=BankProfileResponse,
        ),
        ApiRoute(
            base + "/{bank_id}",
            delete,
            methods=["DELETE"],
            tag="banks",
            summary="Delete a bank and everything in it",
            response=DeleteResponse,
        ),
        ApiRoute(
            base + "/{bank_id}/profile",
            profile,
            methods=["GET"],
            tag="banks",
            summary="A bank's profile",
            response=BankProfileResponse,
        ),
        ApiRoute(
            base + "/{bank_id}/stats",
            stats,
            methods=["GET"],
            tag="banks",
            summary="Counts of a bank's memories, links and work",
            response=BankStatsResponse,
        ),
        ApiRoute(
            base + "/{bank_id}/config",
            get_config,
            methods=["GET"],
            tag="banks",
            summary="A bank's configuration",
            response=BankConfigResponse,
        ),
        ApiRoute(
            base + "/{bank_id}/config",
            patch_config,
            methods=["PATCH"],
            tag="banks",
            summary="Change a bank's configuration",
            body=ConfigPatchIn,
            response=BankConfigResponse,
        ),
        ApiRoute(
            base + "/{bank_id}/config",
            reset_config,
            methods=["DELETE"],
            tag="banks",
            summary="Reset a bank's configuration to the defaults",
            response=BankConfigResponse,
        ),
        ApiRoute(
            "/v1/default/lifecycle/presets",
            lifecycle_presets,
            methods=["GET"],
            tag="banks",
            summary="The lifecycle presets and their settings",
            response=LifecyclePresetsResponse,
        ),
    ]
