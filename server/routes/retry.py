"""`POST .../operations/{id}/retry`: run a failed or cancelled retain, import or consolidation
again, under the same operation id, as a new Temporal workflow.

A retain or import keeps its staged input when it fails or is cancelled
(engine/retain/documents.py, for RETRY_WINDOW); the retry reopens the operation and starts a
new workflow over that input, so documents the first run stored answer their recorded
results and the others run through the pipeline again with the bank's current options. Once
the input has been swept the retry is a 409 that says to send the request again. A
consolidation's input is the bank's backlog, which a failed run leaves in place: its retry
starts the bank's consolidation.
"""

from __future__ import annotations

import uuid
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from temporalio.common import WorkflowIDReusePolicy
from temporalio.service import RPCError

from engine.errors import Conflict, InvalidInput
from engine.imports.payloads import ImportRequest
from engine.retain.documents import RETRY_WINDOW, staged_input
from engine.retain.options import retain_options
from engine.retain.payloads import RetainRequest
from engine.store.banks import get_bank
from engine.store.operations import Operation, get_operation, reopen_operation, update_operation
from server.http import json_response, path_param, services_of
from server.lifecycle_responses import RetryOperationResponse
from server.openapi import ApiRoute
from server.routes.observations import start_consolidation
from server.routes.retain import TERMINAL, reconcile
from server.services import Services
from workflows.imports import ImportWorkflow
from workflows.retain import RetainWorkflow

RETRYABLE_KINDS = ("retain", "reprocess", "import", "consolidation")

_IMPORT_INPUT = """
SELECT i.documents, i.items,
       EXISTS (SELECT 1 FROM import_documents d WHERE d.operation_id = i.operation_id) AS staged
FROM imports i WHERE i.operation_id = $1
"""


def _input_gone(operation: Operation) -> Conflict:
    return Conflict(
        f"operation {operation.operation_id}'s input is no longer kept (a failed or cancelled"
        f" {operation.kind} keeps it for {RETRY_WINDOW}; a failed import whose every document"
        " was tried keeps none): send the request again"
    )


async def _start(
    services: Services, operation: Operation, workflow: Any, payload: Any, workflow_id: str
) -> None:
    """Start the retry's workflow; if Temporal refuses, the operation is failed again (with
    why), never left pending without a workflow."""
    try:
        await services.temporal.start_workflow(
            workflow,
            payload,
            id=workflow_id,
            task_queue=services.settings.task_queue,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
        )
    except RPCError as exc:
        async with services.pool.acquire() as conn:
            await update_operation(
                conn, operation.operation_id, "failed", error=f"retry could not start: {exc}"
            )
        raise


async def _retry_staged(services: Services, operation: Operation) -> None:
    bank_id, operation_id = operation.bank_id, operation.operation_id
    workflow_id = f"{operation.kind}:{bank_id}:{operation_id}:retry-{uuid.uuid4().hex[:12]}"
    async with services.pool.acquire() as conn, conn.transaction():
        bank = await get_bank(conn, bank_id)
        options = retain_options(bank, services.settings)
        payload: RetainRequest | ImportRequest
        if operation.kind in ("retain", "reprocess"):
            documents, items = await staged_input(conn, operation_id)
            if documents == 0:
                raise _input_gone(operation)
            payload = RetainRequest(bank_id, operation_id, documents, items, options)
        else:
            row = await conn.fetchrow(_IMPORT_INPUT, operation_id)
            if row is None or not row["staged"]:
                raise _input_gone(operation)
            payload = ImportRequest(bank_id, operation_id, row["documents"], row["items"], options)
        reopened = await reopen_operation(conn, bank_id, operation_id, workflow_id)
    run = ImportWorkflow.run if operation.kind == "import" else RetainWorkflow.run
    await _start(services, reopened, run, payload, workflow_id)


async def retry_route(request: Request) -> Response:
    bank_id, operation_id = path_param(request, "bank_id"), path_param(request, "operation_id")
    services = services_of(request)
    async with services.pool.acquire() as conn:
        operation = await get_operation(conn, bank_id, operation_id)
    operation = await reconcile(services, operation)
    if operation.kind not in RETRYABLE_KINDS:
        raise InvalidInput(
            "operation_id",
            f"a {operation.kind} operation cannot be retried (only retain,"
            " import and consolidation)",
        )
    if operation.status not in TERMINAL or operation.status == "completed":
        raise Conflict(
            f"operation {operation_id} is {operation.status}; only a failed or cancelled"
            " operation can be retried"
        )
    if operation.kind == "consolidation":
        async with services.pool.acquire() as conn:
            bank = await get_bank(conn, bank_id)
        if not bank.config.enable_observations:
            raise InvalidInput("enable_observations", "is off for this bank; turn it on first")
        workflow_id = await start_consolidation(services, bank_id)
        message = (
            f"consolidation restarted (workflow {workflow_id}); the facts the failed run left"
            " are still on the backlog"
        )
    else:
        await _retry_staged(services, operation)
        message = f"operation {operation_id} queued for retry"
    return json_response({"success": True, "message": message, "operation_id": operation_id})


def routes() -> list[Route]:
    return [
        ApiRoute(
            "/v1/default/banks/{bank_id}/operations/{operation_id}/retry",
            retry_route,
            methods=["POST"],
            tag="operations",
            summary="Run a failed or cancelled retain, import or consolidation again",
            response=RetryOperationResponse,
        )
    ]
