"""`POST .../files/retain`: upload text, Markdown, HTML or PDF files; each becomes a document
retained asynchronously (one operation per file), as Hindsight's file upload does. The
original bytes are kept (engine/store/document_files.py) and served at
`GET .../attachments/{id}`, the id listed in the document's `attachments`."""

from __future__ import annotations

import asyncio
import io
import json
from typing import Any
from urllib.parse import quote

from pydantic import BaseModel, Field, ValidationError
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from engine.errors import InvalidInput
from engine.files import file_text
from engine.limits import MAX_CONTENT_CHARS
from engine.store.banks import ensure_bank, get_bank
from engine.store.document_files import Original, get_original, store_original
from server.http import json_response, path_param, services_of, stored_file_response
from server.openapi import ApiRoute
from server.responses import FileRetainResponse
from server.retain import submit_retain
from server.schemas import Request as Body
from server.schemas import RetainIn

MAX_FILES = 20
MAX_FILE_BYTES = 20 * 1024 * 1024


class FileMeta(Body):
    context: str | None = None
    document_id: str | None = None
    tags: list[str] | None = None
    metadata: dict[str, Any] | None = None
    timestamp: str | None = None


class FileRetainRequest(Body):
    files_metadata: list[FileMeta] | None = None


class FileRetainForm(BaseModel):
    """The multipart body: the files, and `request`, a JSON string (FileRetainRequest)."""

    files: list[bytes] = Field(json_schema_extra={"items": {"type": "string", "format": "binary"}})
    request: str | None = Field(None, description='JSON: {"files_metadata": [{"context", ...}]}')


def parse_request(raw: object) -> FileRetainRequest:
    if raw is None or raw == "":
        return FileRetainRequest()
    if not isinstance(raw, str):
        raise InvalidInput("request", "must be a JSON string field")
    try:
        return FileRetainRequest.model_validate(json.loads(raw))
    except (json.JSONDecodeError, ValidationError) as exc:
        raise InvalidInput("request", f"is not a valid FileRetainRequest ({exc})") from exc


async def retain_files(request: Request) -> Response:
    bank_id = path_param(request, "bank_id")
    async with request.form(max_files=MAX_FILES, max_fields=10) as form:
        uploads = [f for f in form.getlist("files") if isinstance(f, UploadFile)]
        if not uploads:
            raise InvalidInput("files", "upload at least one file (multipart field 'files')")
        options = parse_request(form.get("request"))
        metas = options.files_metadata or []
        if metas and len(metas) != len(uploads):
            raise InvalidInput(
                "request.files_metadata", f"must have one entry per file ({len(uploads)})"
            )
        services = services_of(request)
        loop = asyncio.get_running_loop()
        items: list[dict[str, Any]] = []
        originals: list[tuple[str, str, str, bytes]] = []
        for index, upload in enumerate(uploads):
            field = f"files[{index}]"
            data = await upload.read(MAX_FILE_BYTES + 1)
            if len(data) > MAX_FILE_BYTES:
                raise InvalidInput(field, f"is larger than {MAX_FILE_BYTES // (1024 * 1024)} MB")
            name = upload.filename or f"file-{index}"
            content_type = upload.content_type or ""
            # pypdf is pure Python: a large PDF would hold the event loop.
            text = await loop.run_in_executor(
                services.cpu, file_text, name, content_type, data, field
            )
            if len(text) > MAX_CONTENT_CHARS:
                raise InvalidInput(field, f"holds more than {MAX_CONTENT_CHARS} characters of text")
            meta = metas[index] if metas else FileMeta()
            originals.append((meta.document_id or name, name, content_type, data))
            items.append(
                {
                    "content": text,
                    "document_id": meta.document_id or name,
                    "context": meta.context,
                    "tags": meta.tags,
                    "timestamp": meta.timestamp,
                    "metadata": {
                        "filename": name,
                        **{k: str(v) for k, v in (meta.metadata or {}).items()},
                    },
                }
            )
    # The originals are kept before the retains start: a document never exists without one.
    async with services.pool.acquire() as conn:
        await ensure_bank(conn, bank_id)
        for document_id, name, content_type, data in originals:
            media = content_type or "application/octet-stream"
            await store_original(conn, bank_id, document_id, name, media, io.BytesIO(data))
    operation_ids = []
    for item in items:
        body = RetainIn.model_validate({"items": [item], "async": True})
        operation, _ = await submit_retain(services, bank_id, body)
        operation_ids.append(operation.operation_id)
    return json_response({"operation_ids": operation_ids})


async def get_attachment(request: Request) -> Response:
    bank_id = path_param(request, "bank_id")
    attachment_id = path_param(request, "attachment_id")
    services = services_of(request)
    async with services.pool.acquire() as conn:
        await get_bank(conn, bank_id)
        stored = await get_original(conn, bank_id, attachment_id)
    return stored_file_response(services, stored, "inline")


def attachment_json(bank_id: str, original: Original) -> dict[str, Any]:
    """A document's original as Hindsight's ChunkAttachment."""
    return {
        "id": original.attachment_id,
        "hash": original.sha256,
        "kind": "file",
        "media_type": original.content_type,
        "byte_size": original.byte_size,
        "filename": original.filename,
        "url": f"/v1/default/banks/{quote(bank_id, safe='')}/attachments/" + original.attachment_id,
    }


def routes() -> list[BaseRoute]:
    return [
        ApiRoute(
            "/v1/default/banks/{bank_id}/attachments/{attachment_id}",
            get_attachment,
            methods=["GET"],
            tag="documents",
            summary="The original of a file-retained document (its id from the document's"
            " attachments)",
            response_media="application/octet-stream",
        ),
        ApiRoute(
            "/v1/default/banks/{bank_id}/files/retain",
            retain_files,
            methods=["POST"],
            tag="memories",
            summary="Upload text, Markdown, HTML or PDF files and retain them (one operation each)",
            body=FileRetainForm,
            body_media="multipart/form-data",
            response=FileRetainResponse,
        ),
    ]
