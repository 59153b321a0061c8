"""Retain (`POST .../memories`) and the operations it creates."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from temporalio.client import WorkflowExecutionStatus
from temporalio.service import RPCError

from engine.errors import Conflict
from engine.store.banks import get_bank
from engine.store.operations import (
    Operation,
    delete_operation,
    get_operation,
    list_operations,
    update_operation,
)
from server.http import (
    choice_param,
    int_param,
    iso,
    json_response,
    parse_body,
    path_param,
    services_of,
)
from server.openapi import ApiRoute
from server.queries import OperationsQuery
from server.responses import (
    CancelOperationResponse,
    OperationResponse,
    OperationsListResponse,
    RetainResponse,
)
from server.retain import submit_retain, wait_retain
from server.schemas import RetainIn
from server.services import Services

# Hindsight's clients know "processing", not "running".
WIRE_STATUS = {"running": "processing"}
TERMINAL = ("completed", "failed", "cancelled")
CLOSED_AS = {
    WorkflowExecutionStatus.FAILED: ("failed", "the workflow failed"),
    WorkflowExecutionStatus.TERMINATED: ("failed", "the workflow was terminated"),
    WorkflowExecutionStatus.TIMED_OUT: ("failed", "the workflow timed out"),
    WorkflowExecutionStatus.CANCELED: ("cancelled", "cancelled"),
}


async def retain(request: Request) -> Response:
    bank_id = path_param(request, "bank_id")
    body = await parse_body(request, RetainIn)
    services = services_of(request)
    operation, handle = await submit_retain(services, bank_id, body)
    base: dict[str, Any] = {
        "success": True,
        "bank_id": bank_id,
        "items_count": len(body.items),
        "operation_id": operation.operation_id,
    }
    if body.async_:
        # 200, not 202: the reference client treats any other 2xx as "no body".
        return json_response({**base, "async": True})
    result = await wait_retain(services, operation, handle)
    keys = (
        "documents",
        "document_ids",
        "facts_added",
        "facts_removed",
        "chunks_added",
        "chunks_removed",
        "links_added",
    )
    return json_response({**base, "async": False, **{key: result.get(key) for key in keys}})


async def reconcile(services: Services, operation: Operation) -> Operation:
    """A row still open whose workflow has closed (e.g. terminated by an operator) is
    brought up to date from Temporal, so nothing is reported running forever."""
    if operation.status in TERMINAL:
        return operation
    try:
        handle = services.temporal.get_workflow_handle(operation.workflow_id)
        described = await handle.describe()
    except RPCError:
        return operation
    closed = CLOSED_AS.get(described.status) if described.status else None
    if closed is None:
        return operation
    async with services.pool.acquire() as conn:
        await update_operation(conn, operation.operation_id, closed[0], error=closed[1])
        return await get_operation(conn, operation.bank_id, operation.operation_id)


def operation_json(op: Operation) -> dict[str, Any]:
    progress = op.progress or {}
    return {
        "id": op.operation_id,
        "operation_id": op.operation_id,
        "task_type": op.kind,
        "operation_type": op.kind,
        "items_count": int(progress.get("documents_total", 0)),
        "status": WIRE_STATUS.get(op.status, op.status),
        "created_at": iso(op.created_at),
        "updated_at": iso(op.updated_at),
        "completed_at": iso(op.updated_at) if op.status in TERMINAL else None,
        "error_message": op.error,
        "progress": {
            "stage": op.status,
            "at": iso(op.updated_at),
            "processed": int(progress.get("documents_done", 0)),
            "total": int(progress.get("documents_total", 0)),
            "detail": {k: int(v) for k, v in progress.items()},
        },
        "result_metadata": op.result,
    }


async def list_all(request: Request) -> Response:
    bank_id = path_param(request, "bank_id")
    status = choice_param(request, "status", ("pending", "processing", "running", *TERMINAL))
    if status == "processing":
        status = "running"
    limit = int_param(request, "limit", 50, high=100)
    offset = int_param(request, "offset", 0, high=10**9)
    services = services_of(request)
    async with services.pool.acquire() as conn:
        await get_bank(conn, bank_id)
        operations, total = await list_operations(conn, bank_id, status, limit, offset)
    operations = [await reconcile(services, op) for op in operations]
    return json_response(
        {
            "bank_id": bank_id,
            "operations": [operation_json(op) for op in operations],
            "total": total,
            "limit": limit,
            "offset": offset,
        }
    )


async def get_one(request: Request) -> Response:
    services = services_of(request)
    async with services.pool.acquire() as conn:
        operation = await get_operation(
            conn, path_param(request, "bank_id"), path_param(request, "operation_id")
        )
    return json_response(operation_json(await reconcile(services, operation)))


async def cancel(request: Request) -> Response:
    services = services_of(request)
    async with services.pool.acquire() as conn:
        operation = await get_operation(
            conn, path_param(request, "bank_id"), path_param(request, "operation_id")
        )
    operation = await reconcile(services, operation)
    if operation.status in TERMINAL:
        raise Conflict(f"operation {operation.operation_id} is already {operation.status}")
    await services.temporal.get_workflow_handle(operation.workflow_id).cancel()
    return json_response(
        {
            "success": True,
            "message": "cancellation requested",
            "operation_id": operation.operation_id,
        }
    )


async def delete_done(request: Request) -> Response:
    """Forget a finished operation (Hindsight's `DELETE .../operations/{id}/delete`)."""
    services = services_of(request)
    bank_id, operation_id = path_param(request, "bank_id"), path_param(request, "operation_id")
    async with services.pool.acquire() as conn:
        operation = await get_operation(conn, bank_id, operation_id)
    await reconcile(services, operation)
    async with services.pool.acquire() as conn:
        await delete_operation(conn, bank_id, operation_id)
    return json_response(
        {"success": True, "message": "operation deleted", "operation_id": operation_id}
    )


def routes() -> list[Route]:
    base = "/v1/default/banks/{bank_id}"
    return [
        ApiRoute(
            base + "/memories",
            retain,
            methods=["POST"],
            tag="memories",
            summary="Retain memories",
            body=RetainIn,
            response=RetainResponse,
        ),
        ApiRoute(
            base + "/operations",
            list_all,
            methods=["GET"],
            tag="operations",
            summary="List a bank's operations",
            query=OperationsQuery,
            response=OperationsListResponse,
        ),
        ApiRoute(
            base + "/operations/{operation_id}",
            get_one,
            methods=["GET"],
            tag="operations",
            summary="One operation's status",
            response=OperationResponse,
        ),
        ApiRoute(
            base + "/operations/{operation_id}/delete",
            delete_done,
            methods=["DELETE"],
            tag="operations",
            summary="Forget a completed, failed or cancelled operation",
            response=CancelOperationResponse,
        ),
        ApiRoute(
            base + "/operations/{operation_id}",
            cancel,
            methods=["DELETE"],
            tag="operations",
            summary="Cancel an operation",
            response=CancelOperationResponse,
        ),
    ]
