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

from engine.errors import InvalidInput, OperationFailed
from engine.retain.documents import stage_documents
from engine.retain.options import retain_options
from engine.retain.payloads import DocumentInput, RetainItem, RetainRequest, RetainResult
from engine.store.banks import ensure_bank
from engine.store.operations import Operation, get_operation, register_operation
from server.lifecycle import ensure_lifecycle_schedule
from server.schemas import EntityHint, RetainIn
from server.services import Services
from workflows.retain import RetainWorkflow, error_message

# Item timestamps accepted: a year of margin inside what datetime can hold, so resolving a
# relative date ("next year", "last year") against one cannot overflow.
EARLIEST = datetime(2, 1, 1, tzinfo=UTC)
LATEST = datetime(9998, 12, 31, 23, 59, 59, tzinfo=UTC)


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
    value = value if value.tzinfo else value.replace(tzinfo=UTC)
    # Every date the pipeline stores or computes from this one must stay inside what Python
    # and PostgreSQL can hold: 9999-12-31T23:59:59-12:00 is year 10000 in UTC, which used to be
    # staged, then break the link step of every later retain into the bank.
    try:
        utc = value.astimezone(UTC)
    except OverflowError as exc:
        raise InvalidInput(field, f"is out of range: {raw!r}") from exc
    if not EARLIEST <= utc <= LATEST:
        raise InvalidInput(
            field, f"must be between {EARLIEST.date()} and {LATEST.date()} (UTC): {raw!r}"
        )
    return value


def derived_document_id(item: RetainItem) -> str:
    """Content-addressed: re-sending the same item is a no-op, never a duplicate."""
    stamp = item.timestamp.isoformat() if item.timestamp else "unset"
    raw = "\x1f".join([item.content, stamp, item.context])
    return "auto-" + hashlib.sha256(raw.encode()).hexdigest()[:24]


def build_documents(body: RetainIn, now: datetime) -> list[DocumentInput]:
    """The request's items grouped by document id (validated; a 4xx names the field)."""
    groups: dict[str, list[RetainItem]] = {}
    modes: dict[str, str] = {}
    explicit: dict[str, bool] = {}
    for index, raw in enumerate(body.items):
        tags = list(dict.fromkeys([*(raw.tags or []), *(body.document_tags or [])]))
        hints = [h.text if isinstance(h, EntityHint) else h for h in raw.entities or []]
        item = RetainItem(
            content=raw.text(),
            timestamp=parse_timestamp(raw.timestamp, f"items[{index}].timestamp", now),
            context=raw.context or "",
            metadata=dict(raw.metadata or {}),
            entities=hints,
            tags=tags,
        )
        document_id = raw.document_id or derived_document_id(item)
        groups.setdefault(document_id, []).append(item)
        explicit[document_id] = raw.document_id is not None
        if raw.update_mode is not None and (
            modes.setdefault(document_id, raw.update_mode) != raw.update_mode
        ):
            raise InvalidInput(
                f"items[{index}].update_mode",
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
