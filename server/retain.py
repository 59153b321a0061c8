"""Turning a retain request into a RetainWorkflow run, idempotently by operation id."""

from __future__ import annotations

import hashlib
import json
import uuid
from datetime import UTC, date, datetime
from typing import Any

from temporalio.client import WorkflowFailureError, WorkflowHandle
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError

from engine.errors import InvalidInput, OperationFailed, RequestTooLarge
from engine.limits import MAX_REQUEST_CHARS
from engine.retain.documents import stage_documents
from engine.retain.options import retain_options
from engine.retain.payloads import DocumentInput, RetainItem, RetainRequest, RetainResult
from engine.store.banks import ensure_bank
from engine.store.operations import Operation, get_operation, register_operation
from engine.validation import check_instant
from server.lifecycle import ensure_lifecycle_schedule
from server.schemas import EntityHint, RetainIn
from server.services import Services
from workflows.errors import error_message
from workflows.retain import RetainWorkflow


def parse_timestamp(raw: str | None, field: str, now: datetime) -> datetime | None:
    """ISO-8601 datetime or date; "unset" for timeless content; missing means now."""
    if raw is None or raw == "":
        return now
    if raw == "unset":
        return None
    try:
        value = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        try:
            day = date.fromisoformat(raw)
        except ValueError as exc:
            raise InvalidInput(field, f"is not an ISO-8601 date or datetime: {raw!r}") from exc
        value = datetime(day.year, day.month, day.day)
    return check_instant(value, field)


def check_request(body: RetainIn, now: datetime) -> None:
    """What can be refused before anything is written (the bank is created on first use):
    every timestamp readable and on the calendar, and the content and context of all items
    together within MAX_REQUEST_CHARS (a 413)."""
    for index, raw in enumerate(body.items):
        parse_timestamp(raw.timestamp, f"items.{index}.timestamp", now)
    total = sum(len(item.text()) + len(item.context or "") for item in body.items)
    if total > MAX_REQUEST_CHARS:
        raise RequestTooLarge(
            "items",
            f"hold {total} characters of content and context, over the limit of "
            f"{MAX_REQUEST_CHARS} per request; send fewer items per request or use the import API",
            "MAX_REQUEST_CHARS",
        )


def derived_document_id(item: RetainItem) -> str:
    """Content-addressed: re-sending the same item is a no-op, never a duplicate."""
    stamp = item.timestamp.isoformat() if item.timestamp else "unset"
    raw = "\x1f".join([item.content, stamp, item.context])
    return "auto-" + hashlib.sha256(raw.encode()).hexdigest()[:24]


def _identity(item: RetainItem) -> tuple[object, ...]:
    return (
        item.content,
        item.timestamp,
        item.context,
        tuple(sorted(item.metadata.items())),
        tuple(item.entities),
        tuple(item.tags),
    )


def build_documents(body: RetainIn, now: datetime) -> list[DocumentInput]:
    """The request's items grouped by document id (validated; a 4xx names the field). An
    item repeated in the same document is stored once."""
    groups: dict[str, list[RetainItem]] = {}
    modes: dict[str, str] = {}
    explicit: dict[str, bool] = {}
    seen: set[tuple[object, ...]] = set()
    for index, raw in enumerate(body.items):
        tags = list(dict.fromkeys([*(raw.tags or []), *(body.document_tags or [])]))
        hints = [h.text if isinstance(h, EntityHint) else h for h in raw.entities or []]
        item = RetainItem(
            content=raw.text(),
            timestamp=parse_timestamp(raw.timestamp, f"items.{index}.timestamp", now),
            context=raw.context or "",
            metadata=dict(raw.metadata or {}),
            entities=hints,
            tags=tags,
        )
        document_id = raw.document_id or derived_document_id(item)
        key = (document_id, *_identity(item))
        if key in seen:
            continue
        seen.add(key)
        groups.setdefault(document_id, []).append(item)
        explicit[document_id] = raw.document_id is not None
        if raw.update_mode is not None and (
            modes.setdefault(document_id, raw.update_mode) != raw.update_mode
        ):
            raise InvalidInput(
                f"items.{index}.update_mode",
                f"conflicts with another item of document {document_id!r}",
            )
    return [
        DocumentInput(
            document_id=doc_id,
            items=items,
            update_mode="append" if modes.get(doc_id) == "append" else "replace",
            explicit_id=explicit[doc_id],
        )
        for doc_id, items in groups.items()
    ]


def request_hash(bank_id: str, body: RetainIn) -> str:
    data = body.model_dump(mode="json", exclude={"async_", "operation_id"})
    raw = json.dumps([bank_id, data], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(raw.encode()).hexdigest()


def retain_workflow_id(bank_id: str, operation_id: str) -> str:
    return f"retain:{bank_id}:{operation_id}"


async def submit_retain(
    services: Services, bank_id: str, body: RetainIn
) -> tuple[Operation, WorkflowHandle[RetainWorkflow, RetainResult]]:
    """Register the operation and start its workflow once; a repeat returns the first run."""
    now = datetime.now(UTC)
    check_request(body, now)
    operation_id = body.operation_id or str(uuid.uuid4())
    workflow_id = retain_workflow_id(bank_id, operation_id)
    documents = build_documents(body, now)
    # The items are staged with the operation, in one transaction: the workflow's input and
    # results carry ids and counts only, whatever the size of the items.
    async with services.pool.acquire() as conn, conn.transaction():
        bank = await ensure_bank(conn, bank_id)
        options = retain_options(bank, services.settings)
        operation, created = await register_operation(
            conn, operation_id, bank_id, "retain", workflow_id, request_hash(bank_id, body)
        )
        if created:
            await stage_documents(conn, operation_id, bank_id, documents)
    items = sum(len(d.items) for d in documents)
    request = RetainRequest(bank_id, operation_id, len(documents), items, options)
    await ensure_lifecycle_schedule(services, bank)
    # Starting is attempted even for a known operation: if the first attempt registered the
    # operation but could not reach Temporal, the retry starts it; otherwise the workflow id
    # (REJECT_DUPLICATE) makes this a no-op.
    client = services.temporal
    try:
        handle: WorkflowHandle[RetainWorkflow, RetainResult] = await client.start_workflow(
            RetainWorkflow.run,
            request,
            id=workflow_id,
            task_queue=services.settings.task_queue,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
        )
        return operation, handle
    except WorkflowAlreadyStartedError:
        return operation, client.get_workflow_handle_for(RetainWorkflow.run, workflow_id)


async def wait_retain(
    services: Services,
    operation: Operation,
    handle: WorkflowHandle[RetainWorkflow, RetainResult],
) -> dict[str, Any]:
    """The finished operation's result: totals and document ids (read from its row, as the
    ids of a large request would not fit a workflow result)."""
    try:
        await handle.result()
    except WorkflowFailureError as exc:
        raise OperationFailed(
            operation.operation_id, f"retain failed: {error_message(exc.cause)}"
        ) from exc
    async with services.pool.acquire() as conn:
        done = await get_operation(conn, operation.bank_id, operation.operation_id)
    return dict(done.result or {})
