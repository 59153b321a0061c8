"""Every error answer in one format: JSON `{"detail": ..., "field": ...}`.

`detail` is a sentence in the caller's words; `field` is the path of the offending input in
pydantic's dotted style (`items.0.content`), present when one input is to blame. A value over
a limit adds `limit`, the name of the constant in engine/limits.py (a whole request over a
limit is a 413, one field a 422). An unexpected failure is a 500 with an `error_id` that the
server log line carrying the traceback repeats. Starlette's own 404/405 answer in the same
format, and `ErrorMiddleware` (server/middleware.py) sees to it that nothing else escapes.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import asyncpg
from pydantic import ValidationError
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from engine.errors import (
    Conflict,
    EngramError,
    InvalidInput,
    NotFound,
    OperationFailed,
    RequestTooLarge,
    TooLarge,
    Unprocessable,
)

log = logging.getLogger("engram.server")

# An answer quotes at most this much of what it refuses: a 2 MB value in a date field, or a
# list of 100,000 wrong items, must not come back as a 2 MB or 20 MB error.
MAX_DETAIL_CHARS = 2_000
MAX_ERRORS = 20


class ErrorResponse(JSONResponse):
    """ASCII-only JSON, so an error can always be encoded whatever text it quotes."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, separators=(",", ":")).encode("ascii")


def error_body(
    status: int,
    detail: str,
    field: str | None = None,
    headers: Mapping[str, str] | None = None,
    **extra: object,
) -> ErrorResponse:
    body: dict[str, object] = {"detail": clipped(detail)}
    if field is not None:
        body["field"] = field
    body.update(extra)
    return ErrorResponse(body, status_code=status, headers=headers)


def clipped(text: str, most: int = MAX_DETAIL_CHARS) -> str:
    """`text`, or its start and how much was cut when it is longer than `most`."""
    if len(text) <= most:
        return text
    return f"{text[:most]}… ({len(text) - most:,} more characters cut)"


def internal_error(method: str, path: str, exc: BaseException) -> ErrorResponse:
    """A 500 whose `error_id` finds the traceback in the log."""
    error_id = uuid.uuid4().hex[:16]
    log.error("error_id=%s: %s %s failed", error_id, method, path, exc_info=exc)
    return error_body(
        500,
        f"internal error; the server log has the details under error_id {error_id}",
        error_id=error_id,
    )


async def invalid_input(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, InvalidInput)
    return error_body(400, str(exc), exc.field)


async def unprocessable(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, Unprocessable)
    return error_body(422, str(exc), exc.field)


async def too_large(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, TooLarge)
    status = 413 if isinstance(exc, RequestTooLarge) else 422
    return error_body(status, str(exc), exc.field, limit=exc.limit)


async def not_found(request: Request, exc: Exception) -> Response:
    return error_body(404, str(exc))


async def conflict(request: Request, exc: Exception) -> Response:
    return error_body(409, str(exc))


def _message(err: Any) -> str:
    msg = str(err["msg"])
    return msg.removeprefix("Value error, ")


async def validation_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ValidationError)
    errors = [
        {
            "loc": [str(part) for part in err["loc"]],
            "field": ".".join(str(part) for part in err["loc"]) or "body",
            "msg": clipped(_message(err), 200),
            "type": err["type"],
        }
        for err in exc.errors(include_url=False, include_input=False)[:MAX_ERRORS]
    ]
    first = errors[0]["field"] if errors else "body"
    detail = "; ".join(f"{e['field']}: {e['msg']}" for e in errors)
    if exc.error_count() > MAX_ERRORS:
        detail += f"; and {exc.error_count() - MAX_ERRORS:,} more errors"
    return error_body(422, detail, str(first), errors=errors)


STATUS_WORDS = {
    404: "no such route: {method} {path}",
    405: "{method} is not allowed on {path}",
}


async def http_exception(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    template = STATUS_WORDS.get(exc.status_code)
    if template is not None and exc.detail in ("Not Found", "Method Not Allowed"):
        detail = template.format(method=request.method, path=request.url.path)
    else:
        detail = str(exc.detail)
    return error_body(exc.status_code, detail, headers=exc.headers)


async def operation_failed(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, OperationFailed)
    return error_body(500, str(exc), operation_id=exc.operation_id)


async def engram_error(request: Request, exc: Exception) -> Response:
    return internal_error(request.method, request.url.path, exc)


# How long a caller is told to wait when the database is out of space or away; a restarted
# PostgreSQL answers again within seconds, and space is freed by an operator.
DATABASE_RETRY_AFTER_S = 5
DATABASE_GONE = (
    asyncpg.PostgresConnectionError,
    asyncpg.CannotConnectNowError,
    asyncpg.AdminShutdownError,
    asyncpg.CrashShutdownError,
    asyncpg.ConnectionDoesNotExistError,
    ConnectionError,
)


async def database_full(request: Request, exc: Exception) -> Response:
    """Out of disk (507) or of another resource (503): nothing of this request was kept."""
    log.warning("%s %s: the database refused the write: %s", request.method, request.url.path, exc)
    retry = {"Retry-After": str(DATABASE_RETRY_AFTER_S)}
    if isinstance(exc, asyncpg.DiskFullError):
        detail = "the database is out of disk space; nothing of this request was stored"
        return error_body(507, detail, headers=retry)
    return error_body(503, "the database is out of resources; retry later", headers=retry)


async def database_gone(request: Request, exc: Exception) -> Response:
    log.warning("%s %s: the database is unavailable: %s", request.method, request.url.path, exc)
    retry = {"Retry-After": str(DATABASE_RETRY_AFTER_S)}
    return error_body(503, "the database is unavailable; retry later", headers=retry)


EXCEPTION_HANDLERS: Mapping[Any, Callable[[Request, Exception], Awaitable[Response]]] = {
    RequestTooLarge: too_large,
    TooLarge: too_large,
    Unprocessable: unprocessable,
    InvalidInput: invalid_input,
    NotFound: not_found,
    Conflict: conflict,
    ValidationError: validation_error,
    HTTPException: http_exception,
    OperationFailed: operation_failed,
    EngramError: engram_error,
    asyncpg.InsufficientResourcesError: database_full,
    **{kind: database_gone for kind in DATABASE_GONE},
}
