"""Moving data between banks and machines, in Hindsight's shapes (docs/transfer.md):

- `POST .../transfer/export`, `POST .../document-transfer/export`: an archive, written in
  the background; the operation's `result_metadata` gives its `download_url`.
- `POST .../transfer/import` (restore into a new bank, or merge into this one) and
  `POST .../document-transfer` (merge): a multipart upload of an archive, imported by a
  TransferWorkflow.
- `POST .../clone`: export and import back to back into a new bank.
- `GET /v1/default/files/download/{key}`: a stored archive, scoped to its bank by
  server/security.py.

Every one of them answers 202 with the operation id at once.
"""

from __future__ import annotations

import contextlib
import uuid
import zipfile
from typing import Annotated, Literal

from pydantic import BaseModel, Field
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from engine.errors import Conflict, InvalidInput, NotFound
from engine.store.banks import ensure_bank, get_bank, validate_bank_id
from engine.store.operations import register_operation
from engine.transfer.payloads import ExportScope, ImportPlan, Kind, TransferRequest
from engine.transfer.restore import check_compatible, read_manifest
from engine.transfer.storage import delete_file, get_stored_file, store_file
from server.http import (
    bool_param,
    choice_param,
    json_response,
    path_param,
    principal_of,
    services_of,
    stored_file_response,
    text_param,
    texts_param,
)
from server.lifecycle import ensure_lifecycle_schedule
from server.openapi import ApiRoute
from server.responses import NotImplementedResponse
from server.services import Services
from workflows.transfer import TransferWorkflow, transfer_workflow_id

BANK = "/v1/default/banks/{bank_id}"
DOWNLOAD = "/v1/default/files/download/{key}"
MAX_DOCUMENT_IDS = 1000


class BankTransferSubmitResponse(BaseModel):
    """202: poll GET .../operations/{operation_id}; an export's result_metadata carries
    download_url, storage_key, byte_size and filename; an import's the counts."""

    operation_id: str
    status: str = "pending"


class DocumentExportSubmitResponse(BankTransferSubmitResponse):
    pass


class DocumentImportSubmitResponse(BankTransferSubmitResponse):
    pass


class TransferExportQuery(BaseModel):
    include_data: bool = Field(True, description="Carry the memories and everything backing them")
    include_bank_config: bool = Field(
        True, description="Carry the bank's config, directives and webhooks"
    )
    include_history: bool = Field(False, description="Carry audit_log and llm_requests")
    document_id: list[str] | None = Field(
        None, description="Document id(s); omit for the whole bank"
    )


class DocumentExportQuery(BaseModel):
    document_id: list[str] | None = Field(
        None, description="Document id(s) to export; omit for all"
    )
    include_observations: bool = Field(
        False, description="Also export consolidated observations (whole-bank only)"
    )
    include_knowledge_base: bool = Field(
        False, description="Also export mental models (whole-bank only)"
    )


class TransferImportQuery(BaseModel):
    mode: Literal["restore", "merge"] = Field(
        "restore", description="restore (into a fresh bank) | merge (into this bank)"
    )
    target_bank_id: str | None = Field(
        None, description="restore mode: the bank to create; defaults to the archive's source"
    )
    document_conflict: Literal["skip", "replace", "new-id"] = Field(
        "skip", description="merge mode: skip | replace | new-id"
    )
    include_data: bool = True
    include_bank_config: bool = True
    include_history: bool = False


class DocumentImportQuery(BaseModel):
    on_conflict: Literal["skip", "replace", "new-id"] = Field(
        "skip", description="skip | replace | new-id"
    )


class CloneQuery(BaseModel):
    target_bank_id: Annotated[str, Field(min_length=1, max_length=200)] = Field(
        description="Bank to create; must not already exist"
    )
    include_data: bool = True
    include_bank_config: bool = True
    include_history: bool = False


class TransferArchiveForm(BaseModel):
    """The multipart body: `file`, a transfer ZIP archive."""

    file: bytes = Field(json_schema_extra={"format": "binary"}, description="Transfer ZIP archive")


def _document_ids(request: Request) -> list[str] | None:
    ids = texts_param(request, "document_id")
    if len(ids) > MAX_DOCUMENT_IDS:
        raise InvalidInput("document_id", f"at most {MAX_DOCUMENT_IDS} documents per export")
    return ids or None


def _conflict(request: Request, name: str) -> Literal["skip", "replace", "new-id"]:
    rule = choice_param(request, name, ("skip", "replace", "new-id")) or "skip"
    return "replace" if rule == "replace" else "new-id" if rule == "new-id" else "skip"


async def _existing_bank(services: Services, bank_id: str) -> None:
    """404 unless the bank exists (checked before a body is read or a bank is made)."""
    async with services.pool.acquire() as conn:
        await get_bank(conn, bank_id)


async def _start(
    services: Services,
    kind: Kind,
    bank_id: str,
    scope: ExportScope | None = None,
    plan: ImportPlan | None = None,
    archive_key: str | None = None,
    operation_id: str | None = None,
) -> Response:
    """Register the operation on `bank_id` (which must exist) and start its TransferWorkflow;
    202 with the operation id."""
    operation_id = operation_id or str(uuid.uuid4())
    workflow_id = transfer_workflow_id(bank_id, operation_id)
    async with services.pool.acquire() as conn:
        await get_bank(conn, bank_id)
        await register_operation(conn, operation_id, bank_id, kind, workflow_id, operation_id)
        target = await get_bank(conn, plan.bank_id) if plan is not None else None
    if target is not None:
        await ensure_lifecycle_schedule(services, target)
    await services.temporal.start_workflow(
        TransferWorkflow.run,
        TransferRequest(kind, bank_id, operation_id, scope, plan, archive_key),
        id=workflow_id,
        task_queue=services.settings.task_queue,
    )
    return json_response({"operation_id": operation_id, "status": "pending"}, status_code=202)


async def _new_bank(request: Request, services: Services, bank_id: str) -> None:
    """The target of a restore or clone: a bank that does not exist yet, visible to the key."""
    validate_bank_id(bank_id)
    if not principal_of(request).sees(bank_id):
        raise NotFound("bank", bank_id)
    async with services.pool.acquire() as conn, conn.transaction():
        with contextlib.suppress(NotFound):
            await get_bank(conn, bank_id)
            raise Conflict(f"bank {bank_id!r} already exists; a restore or clone makes a new bank")
        await ensure_bank(conn, bank_id)


async def _drop_bank(services: Services, bank_id: str) -> None:
    """A bank this request created, gone again because the request failed."""
    async with services.pool.acquire() as conn:
        await conn.execute("DELETE FROM banks WHERE bank_id = $1", bank_id)


def _bank_scope(request: Request, document_ids: list[str] | None = None) -> ExportScope:
    """A whole bank's export (transfer export, clone) as the query asks for it."""
    include_data = bool_param(request, "include_data", True)
    return ExportScope(
        include_data=include_data,
        include_bank_config=bool_param(request, "include_bank_config", True),
        include_history=bool_param(request, "include_history", False),
        include_observations=include_data,
        include_mental_models=include_data,
        document_ids=document_ids,
    )


async def export_bank_transfer(request: Request) -> Response:
    scope = _bank_scope(request, _document_ids(request))
    return await _start(
        services_of(request), "transfer_export", path_param(request, "bank_id"), scope
    )


async def export_documents(request: Request) -> Response:
    scope = ExportScope(
        include_data=True,
        include_bank_config=False,
        include_observations=bool_param(request, "include_observations", False),
        include_mental_models=bool_param(request, "include_knowledge_base", False),
        document_ids=_document_ids(request),
    )
    return await _start(
        services_of(request), "document_export", path_param(request, "bank_id"), scope
    )


async def clone_bank(request: Request) -> Response:
    bank_id = path_param(request, "bank_id")
    services = services_of(request)
    target = text_param(request, "target_bank_id")
    if target is None:
        raise InvalidInput("target_bank_id", "is required")
    if target == bank_id:
        raise InvalidInput("target_bank_id", "must differ from the bank cloned")
    scope = _bank_scope(request)
    await _existing_bank(services, bank_id)
    await _new_bank(request, services, target)
    operation_id = str(uuid.uuid4())
    plan = ImportPlan(operation_id, target, "restore", "skip", True, True, True)
    return await _start(
        services, "clone", bank_id, scope=scope, plan=plan, operation_id=operation_id
    )


async def _upload(request: Request, services: Services, bank_id: str, key: str) -> str:
    """The uploaded archive, checked (a ZIP with a manifest this Engram can read) and stored
    under `key`; the archive's source bank. Starlette has spooled the upload to a temporary
    file past 1 MiB; it is copied into the store in 1 MiB chunks."""
    async with request.form(max_files=1, max_fields=1) as form:
        upload = form.get("file")
        if not isinstance(upload, UploadFile):
            raise InvalidInput("file", "upload the archive as multipart field 'file'")
        try:
            with zipfile.ZipFile(upload.file) as archive:
                manifest = read_manifest(archive)
        except zipfile.BadZipFile as exc:
            raise InvalidInput("file", "is not a ZIP archive") from exc
        async with services.pool.acquire() as conn:
            await check_compatible(conn, manifest)
            upload.file.seek(0)
            name = upload.filename or "archive.zip"
            await store_file(conn, key, bank_id, name, "application/zip", upload.file)
    return manifest.source_bank_id


async def import_bank_transfer(request: Request) -> Response:
    bank_id = path_param(request, "bank_id")
    services = services_of(request)
    mode = choice_param(request, "mode", ("restore", "merge")) or "restore"
    target = text_param(request, "target_bank_id")
    operation_id = str(uuid.uuid4())
    key = f"import-{operation_id}.zip"
    async with services.pool.acquire() as conn:
        exists = await conn.fetchval(
            "SELECT EXISTS (SELECT 1 FROM banks WHERE bank_id = $1)", bank_id
        )
    created = False
    if not exists:
        # A restore on a new machine names the bank it brings back: it is created first.
        if mode == "merge" or target not in (None, bank_id):
            raise NotFound("bank", bank_id)
        await _new_bank(request, services, bank_id)
        created, target = True, bank_id
    elif mode == "restore" and target is not None:
        await _refuse_existing(services, target)
    try:
        source = await _upload(request, services, bank_id, key)
    except BaseException:
        if created:
            await _drop_bank(services, bank_id)
        raise
    if mode == "merge":
        plan = ImportPlan(operation_id, bank_id, "merge", _conflict(request, "document_conflict"))
    else:
        target = target or source
        if not created:
            try:
                await _new_bank(request, services, target)
            except (Conflict, NotFound, InvalidInput):
                async with services.pool.acquire() as conn:
                    await delete_file(conn, key)
                raise
        plan = ImportPlan(
            operation_id,
            target,
            "restore",
            "skip",
            bool_param(request, "include_data", True),
            bool_param(request, "include_bank_config", True),
            bool_param(request, "include_history", False),
        )
    return await _start(
        services, "transfer_import", bank_id, plan=plan, archive_key=key, operation_id=operation_id
    )


async def _refuse_existing(services: Services, bank_id: str) -> None:
    async with services.pool.acquire() as conn:
        with contextlib.suppress(NotFound):
            await get_bank(conn, bank_id)
            raise Conflict(f"bank {bank_id!r} already exists; a restore makes a new bank")


async def import_documents(request: Request) -> Response:
    bank_id = path_param(request, "bank_id")
    services = services_of(request)
    await _existing_bank(services, bank_id)
    operation_id = str(uuid.uuid4())
    key = f"import-{operation_id}.zip"
    await _upload(request, services, bank_id, key)
    plan = ImportPlan(operation_id, bank_id, "merge", _conflict(request, "on_conflict"))
    return await _start(
        services, "document_import", bank_id, plan=plan, archive_key=key, operation_id=operation_id
    )


async def export_documents_sync_removed(request: Request) -> Response:
    path_param(request, "bank_id")
    return json_response(
        {
            "detail": "the synchronous document export was removed (as in Hindsight): it held"
            " the whole bank in one request",
            "use_instead": f"POST {BANK}/document-transfer/export",
        },
        status_code=410,
    )


async def download_file(request: Request) -> Response:
    key = path_param(request, "key")
    services = services_of(request)
    async with services.pool.acquire() as conn:
        stored = await get_stored_file(conn, key)
    if not principal_of(request).sees(stored.bank_id):
        raise NotFound("file", key)
    return stored_file_response(services, stored, "attachment")


def routes() -> list[BaseRoute]:
    tag = "transfer"
    return [
        ApiRoute(
            BANK + "/transfer/export",
            export_bank_transfer,
            methods=["POST"],
            tag=tag,
            summary="Export a bank as a transfer archive (async; result_metadata.download_url)",
            query=TransferExportQuery,
            response=BankTransferSubmitResponse,
            status=202,
        ),
        ApiRoute(
            BANK + "/transfer/import",
            import_bank_transfer,
            methods=["POST"],
            tag=tag,
            summary="Import a transfer archive: restore a new bank or merge documents (async)",
            query=TransferImportQuery,
            body=TransferArchiveForm,
            body_media="multipart/form-data",
            response=BankTransferSubmitResponse,
            status=202,
        ),
        ApiRoute(
            BANK + "/clone",
            clone_bank,
            methods=["POST"],
            tag=tag,
            summary="Copy this bank into a new one (async)",
            query=CloneQuery,
            response=BankTransferSubmitResponse,
            status=202,
        ),
        ApiRoute(
            BANK + "/document-transfer",
            export_documents_sync_removed,
            methods=["GET"],
            tag=tag,
            summary="Removed (410): use POST .../document-transfer/export",
            response=NotImplementedResponse,
            status=410,
        ),
        ApiRoute(
            BANK + "/document-transfer",
            import_documents,
            methods=["POST"],
            tag=tag,
            summary="Import documents from a transfer archive into this bank (async)",
            query=DocumentImportQuery,
            body=TransferArchiveForm,
            body_media="multipart/form-data",
            response=DocumentImportSubmitResponse,
            status=202,
        ),
        ApiRoute(
            BANK + "/document-transfer/export",
            export_documents,
            methods=["POST"],
            tag=tag,
            summary="Export documents as a transfer archive (async)",
            query=DocumentExportQuery,
            response=DocumentExportSubmitResponse,
            status=202,
        ),
        ApiRoute(
            DOWNLOAD,
            download_file,
            methods=["GET"],
            tag=tag,
            summary="Download a stored file (an export's archive), scoped to its bank",
            response_media="application/zip",
        ),
    ]
