"""Turning a retain request into a RetainWorkflow run, idempotently by operation id."""

from __future__ import annotations

import hashlib
import json
import uuid
from datetime import UTC, date, datetime

from temporalio.client import WorkflowFailureError, WorkflowHandle
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError

from engine.errors import InvalidInput, OperationFailed
from engine.retain.payloads import (
    DocumentInput,
    RetainItem,
    RetainOptions,
    RetainRequest,
    RetainResult,
)
from engine.settings import Settings
from engine.store.banks import Bank, ensure_bank
from engine.store.operations import Operation, register_operation
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
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def derived_document_id(item: RetainItem) -> str:
    """Content-addressed: re-sending the same item is a no-op, never a duplicate."""
    stamp = item.timestamp.isoformat() if item.timestamp else "unset"
    raw = "\x1f".join([item.content, stamp, item.context])
    return "auto-" + hashlib.sha256(raw.encode()).hexdigest()[:24]


def extraction_mode(bank: Bank, settings: Settings) -> str:
    mode = bank.config.extraction_mode or settings.default_extraction_mode
    if mode == "llm" and not settings.llm.configured:
        raise InvalidInput(
            "extraction_mode",
            "the bank asks for llm extraction but no LLM key is configured "
            "(set ENGRAM_LLM_API_KEY or choose local)",
        )
    return mode


def build_request(
    bank: Bank, settings: Settings, body: RetainIn, operation_id: str, now: datetime
) -> RetainRequest:
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
    config = bank.config
    mode = extraction_mode(bank, settings)
    options = RetainOptions(
        extraction_mode=mode,  # type: ignore[arg-type]
        chunk_size=config.chunk_size,
        retain_mission=config.retain_mission,
        enable_entity_links=config.enable_entity_links,
        enable_semantic_links=config.enable_semantic_links,
        enable_temporal_links=config.enable_temporal_links,
        enable_causal_links=config.enable_causal_links,
        enable_observations=config.enable_observations,
    )
    documents = [
        DocumentInput(
            document_id=doc_id,
            items=items,
            update_mode="append" if modes.get(doc_id) == "append" else "replace",
            explicit_id=explicit[doc_id],
        )
        for doc_id, items in groups.items()
    ]
    return RetainRequest(bank.bank_id, operation_id, documents, options)


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
    async with services.pool.acquire() as conn:
        bank = await ensure_bank(conn, bank_id)
        request = build_request(bank, services.settings, body, operation_id, now)
        operation, _ = await register_operation(
            conn, operation_id, bank_id, "retain", workflow_id, request_hash(bank_id, body)
        )
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
    operation_id: str, handle: WorkflowHandle[RetainWorkflow, RetainResult]
) -> RetainResult:
    try:
        return await handle.result()
    except WorkflowFailureError as exc:
        raise OperationFailed(operation_id, f"retain failed: {error_message(exc.cause)}") from exc
