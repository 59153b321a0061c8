"""Bulk import and export of a bank (Engram's own routes, not part of the Hindsight wire format).

`POST /v1/default/banks/{bank_id}/import` takes a JSON body, either one file:

    {"content": "<file text>", "name": "chat.jsonl", "format": null, "on_error": "skip"}

or several (a folder of notes):

    {"files": [{"name": "notes/a.md", "content": "..."}, ...]}

with optional `format` (jsonl, chatgpt, locomo, text; detected per file when null),
`on_error` (`skip`: bad records are reported and left out; `stop`: the first one rejects the
whole import with a 400 naming its position), `operation_id` (idempotency key),
`user_name` and `assistant_name` (speakers for the roles user and assistant). The file is
parsed and staged in PostgreSQL, an ImportWorkflow starts, and the answer is 202 with the
operation id, the counts and the record errors. Progress: the operations API, or
`GET /v1/default/imports/{operation_id}` for the live progress of the workflow.
`GET /v1/default/banks/{bank_id}/export` streams the bank as JSON Lines that import reads back.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import BaseRoute
from temporalio.client import (
    WorkflowQueryFailedError,
    WorkflowQueryRejectedError,
)
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError

from engine.errors import InvalidInput, Unprocessable
from engine.imports.export import export_records
from engine.imports.model import MAX_REPORTED_ERRORS, ImportOptions, ParsedImport, SourceFile
from engine.imports.parse import parse_import
from engine.imports.payloads import ImportRequest
from engine.imports.staging import ImportSummary, get_import, stage_import
from engine.retain.options import retain_options
from engine.store.banks import ensure_bank, get_bank
from engine.store.operations import Operation, get_operation, register_operation
from engine.validation import printable, text_problem
from server.http import check_visible, iso, json_object, json_response, path_param, services_of
from server.lifecycle import ensure_lifecycle_schedule
from server.openapi import ApiRoute
from server.routes.retain import TERMINAL, WIRE_STATUS, reconcile
from server.services import Services
from workflows.imports import ImportWorkflow, import_workflow_id

# How long a status request waits for the workflow to answer its progress query before it
# falls back to the progress last written to the operations row (e.g. no worker running).
QUERY_TIMEOUT = timedelta(seconds=2)


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore")


class ImportFileIn(_Body):
    name: Annotated[str, Field(max_length=1000)] = ""
    content: str


class ImportIn(_Body):
    content: str | None = None
    name: Annotated[str, Field(max_length=1000)] | None = None
    files: list[ImportFileIn] | None = None
    format: Literal["jsonl", "chatgpt", "locomo", "text"] | None = None
    on_error: Literal["skip", "stop"] = "skip"
    operation_id: Annotated[str, Field(min_length=1, max_length=200)] | None = None
    user_name: Annotated[str, Field(min_length=1, max_length=80)] | None = None
    assistant_name: Annotated[str, Field(min_length=1, max_length=80)] | None = None

    def sources(self) -> list[SourceFile]:
        if (self.content is None) == (self.files is None):
            raise InvalidInput("content", "give either content (one file) or files, not both")
        if self.files is not None:
            if not self.files:
                raise InvalidInput("files", "must not be empty")
            return [SourceFile(f.name, f.content) for f in self.files]
        assert self.content is not None
        return [SourceFile(self.name or "", self.content)]

    def options(self) -> ImportOptions:
        defaults = ImportOptions()
        return ImportOptions(
            format=self.format,
            on_error=self.on_error,
            user_name=self.user_name or defaults.user_name,
            assistant_name=self.assistant_name or defaults.assistant_name,
        )


def _check_records(parsed: ParsedImport) -> None:
    """Text inside the files (JSON escapes decoded by the parsers) passes the same check as
    the request body's: nothing unstorable reaches staging or the worker."""
    for document in parsed.documents:
        for index, item in enumerate(document.items):
            texts = [item.content, item.context, *item.tags, *item.entities]
            texts += [*item.metadata.keys(), *item.metadata.values()]
            for text in texts:
                problem = text_problem(text)
                if problem is not None:
                    raise Unprocessable(
                        "content",
                        f"document {printable(document.document_id)!r} item {index} {problem}",
                    )


def _prepare(raw: bytes, bank_id: str) -> tuple[ImportIn, ParsedImport, str]:
    """CPU work, off the event loop: decode, parse, and the request's fingerprint."""
    body = ImportIn.model_validate(json_object(raw))
    sources = body.sources()
    parsed = parse_import(sources, body.options())
    _check_records(parsed)
    digest = hashlib.sha256(bank_id.encode())
    for source in sources:
        digest.update(f"\x1e{len(source.name)}:{source.name}{len(source.content)}:".encode())
        digest.update(source.content.encode())
    digest.update(repr(body.options()).encode())
    return body, parsed, digest.hexdigest()


def errors_json(parsed_errors: list[Any]) -> list[dict[str, str]]:
    return [{"position": e.position, "message": e.message} for e in parsed_errors]


async def start_import(request: Request) -> Response:
    bank_id = path_param(request, "bank_id")
    services = services_of(request)
    raw = await request.body()
    loop = asyncio.get_running_loop()
    body, parsed, fingerprint = await loop.run_in_executor(services.cpu, _prepare, raw, bank_id)
    if not parsed.documents:
        first = f" (first: {parsed.errors[0]})" if parsed.errors else ""
        raise InvalidInput(
            "content", f"nothing to import: {len(parsed.errors)} records unreadable{first}"
        )
    operation_id = body.operation_id or str(uuid.uuid4())
    workflow_id = import_workflow_id(bank_id, operation_id)
    async with services.pool.acquire() as conn, conn.transaction():
        bank = await ensure_bank(conn, bank_id)
        options = retain_options(bank, services.settings)
        _, created = await register_operation(
            conn, operation_id, bank_id, "import", workflow_id, fingerprint
        )
        if created:
            await stage_import(conn, operation_id, bank_id, parsed)
    await ensure_lifecycle_schedule(services, bank)
    # The same request again finds its import already running or done.
    with contextlib.suppress(WorkflowAlreadyStartedError):
        await services.temporal.start_workflow(
            ImportWorkflow.run,
            ImportRequest(bank_id, operation_id, len(parsed.documents), parsed.records, options),
            id=workflow_id,
            task_queue=services.settings.task_queue,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
        )
    return json_response(
        {
            "operation_id": operation_id,
            "bank_id": bank_id,
            "formats": parsed.formats,
            "documents": len(parsed.documents),
            "items": parsed.records,
            "skipped": len(parsed.errors),
            "errors": errors_json(parsed.errors[:MAX_REPORTED_ERRORS]),
        },
        status_code=202,
    )


async def live_progress(services: Services, operation: Operation) -> dict[str, int]:
    """The workflow's own progress while it runs; the operations row otherwise."""
    stored = {k: int(v) for k, v in (operation.progress or {}).items()}
    if operation.status in TERMINAL:
        return stored
    handle = services.temporal.get_workflow_handle_for(ImportWorkflow.run, operation.workflow_id)
    try:
        progress = await handle.query(ImportWorkflow.progress, rpc_timeout=QUERY_TIMEOUT)
    except (RPCError, WorkflowQueryFailedError, WorkflowQueryRejectedError):
        return stored
    return progress.as_counts()


def status_json(summary: ImportSummary, operation: Operation, progress: dict[str, int]) -> Any:
    return {
        "operation_id": operation.operation_id,
        "bank_id": summary.bank_id,
        "status": WIRE_STATUS.get(operation.status, operation.status),
        "formats": summary.formats,
        "documents": summary.documents,
        "items": summary.items,
        "skipped": summary.error_count,
        "errors": errors_json(summary.errors),
        "progress": progress,
        "result": operation.result,
        "error": operation.error,
        "created_at": iso(operation.created_at),
        "updated_at": iso(operation.updated_at),
    }


async def import_status(request: Request) -> Response:
    services = services_of(request)
    operation_id = path_param(request, "operation_id")
    async with services.pool.acquire() as conn:
        summary = await get_import(conn, operation_id)
        check_visible(request, summary.bank_id, "import", operation_id)
        bank_id = request.path_params.get("bank_id", summary.bank_id)
        operation = await get_operation(conn, bank_id, operation_id)
    operation = await reconcile(services, operation)
    progress = await live_progress(services, operation)
    return json_response(status_json(summary, operation, progress))


async def export_bank(request: Request) -> Response:
    bank_id = path_param(request, "bank_id")
    services = services_of(request)
    async with services.pool.acquire() as conn:
        await get_bank(conn, bank_id)

    async def lines() -> AsyncIterator[str]:
        async with services.pool.acquire() as conn:
            async for record in export_records(conn, bank_id):
                yield json.dumps(record, ensure_ascii=False, default=str) + "\n"

    return StreamingResponse(lines(), media_type="application/x-ndjson")


def routes() -> list[BaseRoute]:
    base = "/v1/default/banks/{bank_id}"
    return [
        ApiRoute(
            base + "/import",
            start_import,
            methods=["POST"],
            tag="imports",
            summary="Import documents in bulk (docs/import.md)",
        ),
        ApiRoute(
            base + "/import/{operation_id}",
            import_status,
            methods=["GET"],
            tag="imports",
            summary="An import's progress",
        ),
        ApiRoute(
            "/v1/default/imports/{operation_id}",
            import_status,
            methods=["GET"],
            tag="imports",
            summary="An import's progress",
        ),
        ApiRoute(
            base + "/export",
            export_bank,
            methods=["GET"],
            tag="imports",
            summary="The bank as JSON lines (application/x-ndjson)",
            response_media="application/x-ndjson",
        ),
    ]
