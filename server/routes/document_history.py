"""A document's history (`GET .../documents/{id}/history`) and reprocessing (`POST
.../documents/{id}/reprocess`).

History lists the document's events (engine/store/document_history.py), newest first:
every retain, import, append and reprocess that stored it, with the content hash it left and
what it changed, and every later change: a fact of it edited, invalidated, restored or
deleted, the document retagged or deleted, a consolidation that built observations from its
facts. Reprocess stages the stored document as a retain operation of kind
`reprocess` and runs it through the one document pipeline (RetainWorkflow →
workflows/pipeline.py) with the bank's current options: every chunk is extracted again and
the old facts replaced. A document retained as several items is reprocessed as those items,
each with its own timestamp, context, tags, metadata and entity hints (documents.items);
one stored before migration 0019 (or whose text an erasure reshaped) as one item.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from pydantic import BaseModel, Field
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from temporalio.common import WorkflowIDReusePolicy

from engine.retain.documents import stage_documents, stored_items
from engine.retain.options import retain_options
from engine.retain.payloads import DocumentInput, RetainItem, RetainRequest
from engine.store.banks import get_bank
from engine.store.document_history import KIND_OF_MODE, DocumentVersion, document_history
from engine.store.documents import document_spans, get_document
from engine.store.operations import register_operation
from server.http import int_param, iso, json_response, path_param, services_of
from server.lifecycle_responses import DocumentHistoryResponse, ReprocessDocumentResponse
from server.openapi import ApiRoute
from server.retain import retain_workflow_id
from workflows.retain import RetainWorkflow


class HistoryQuery(BaseModel):
    limit: Annotated[int, Field(ge=1, le=1000)] | None = None
    offset: Annotated[int, Field(ge=0)] | None = None


MAX_IDS = 20


def _sample(ids: tuple[str, ...]) -> dict[str, Any] | None:
    """Hindsight's ObservationIdSample: the count, and the first MAX_IDS ids."""
    return {"count": len(ids), "ids": list(ids[:MAX_IDS])} if ids else None


def event_json(v: DocumentVersion) -> dict[str, Any]:
    written = v.kind in KIND_OF_MODE.values()
    return {
        "document_id": v.document_id,
        "kind": v.kind,
        "created_at": iso(v.created_at),
        "operation_id": v.operation_id or None,
        "fact_id": v.fact_id,
        "facts_added": v.facts_added,
        "facts_removed": v.facts_removed,
        "observations_created": _sample(v.observations_created),
        "observations_updated": _sample(v.observations_updated),
        "observations_removed": _sample(v.observations_removed),
        "content_hash": v.content_hash or None,
        "items_count": v.items_count if written else None,
        "chunks_added": v.chunks_added if written else None,
        "chunks_removed": v.chunks_removed if written else None,
    }


async def history_route(request: Request) -> Response:
    bank_id, document_id = path_param(request, "bank_id"), path_param(request, "document_id")
    limit = int_param(request, "limit", 100, low=1, high=1000)
    offset = int_param(request, "offset", 0, high=10**9)
    async with services_of(request).pool.acquire() as conn:
        await get_bank(conn, bank_id)
        versions, total = await document_history(conn, bank_id, document_id, limit, offset)
    return json_response(
        {
            "document_id": document_id,
            "total": total,
            "limit": limit,
            "offset": offset,
            "items": [event_json(v) for v in versions],
        }
    )


async def reprocess_route(request: Request) -> Response:
    bank_id, document_id = path_param(request, "bank_id"), path_param(request, "document_id")
    services = services_of(request)
    operation_id = str(uuid.uuid4())
    workflow_id = retain_workflow_id(bank_id, operation_id)
    async with services.pool.acquire() as conn, conn.transaction():
        bank = await get_bank(conn, bank_id)
        options = retain_options(bank, services.settings)
        document = await get_document(conn, bank_id, document_id)
        items = stored_items(document.content, await document_spans(conn, bank_id, document_id))
        if items is None:
            items = [
                RetainItem(
                    content=document.content,
                    timestamp=document.mentioned_at,
                    context=document.context,
                    metadata={str(k): str(v) for k, v in document.metadata.items()},
                    tags=list(document.tags),
                )
            ]
        await register_operation(
            conn, operation_id, bank_id, "reprocess", workflow_id, f"reprocess:{document_id}"
        )
        staged = DocumentInput(document_id, items, update_mode="reprocess")
        await stage_documents(conn, operation_id, bank_id, [staged])
    await services.temporal.start_workflow(
        RetainWorkflow.run,
        RetainRequest(bank_id, operation_id, 1, len(items), options),
        id=workflow_id,
        task_queue=services.settings.task_queue,
        id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
    )
    return json_response({"success": True, "operation_id": operation_id, "items_count": len(items)})


def routes() -> list[Route]:
    base = "/v1/default/banks/{bank_id}/documents/{document_id}"
    return [
        ApiRoute(
            base + "/history",
            history_route,
            methods=["GET"],
            tag="documents",
            summary="A document's history, newest first: writes, edits, deletes, consolidations",
            query=HistoryQuery,
            response=DocumentHistoryResponse,
        ),
        ApiRoute(
            base + "/reprocess",
            reprocess_route,
            methods=["POST"],
            tag="documents",
            summary="Extract a stored document again with the bank's current configuration",
            response=ReprocessDocumentResponse,
        ),
    ]
