"""Engine errors mapped once to HTTP responses: a clear 4xx naming the field, never a trace."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from pydantic import ValidationError
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from engine.errors import Conflict, EngramError, InvalidInput, NotFound, OperationFailed

log = logging.getLogger("engram.server")


def error_body(status: int, detail: str, field: str | None = None) -> JSONResponse:
    body: dict[str, object] = {"detail": detail}
    if field is not None:
        body["field"] = field
    return JSONResponse(body, status_code=status)


async def invalid_input(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, InvalidInput)
    return error_body(400, str(exc), exc.field)


async def not_found(request: Request, exc: Exception) -> Response:
    return error_body(404, str(exc))


async def conflict(request: Request, exc: Exception) -> Response:
    return error_body(409, str(exc))


async def validation_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ValidationError)
    errors = [
        {
            "loc": [str(part) for part in err["loc"]],
            "field": ".".join(str(part) for part in err["loc"]) or "body",
            "msg": err["msg"],
            "type": err["type"],
        }
        for err in exc.errors()
    ]
    first = errors[0]["field"] if errors else "body"
    detail = "; ".join(f"{e['field']}: {e['msg']}" for e in errors)
    return JSONResponse({"detail": detail, "field": first, "errors": errors}, status_code=422)


async def http_exception(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return error_body(exc.status_code, str(exc.detail))


async def operation_failed(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, OperationFailed)
    operation_id = exc.operation_id
    return JSONResponse({"detail": str(exc), "operation_id": operation_id}, status_code=500)


async def engram_error(request: Request, exc: Exception) -> Response:
    log.error("unhandled engine error on %s: %s", request.url.path, exc)
    return error_body(500, f"internal error: {type(exc).__name__}")


EXCEPTION_HANDLERS: Mapping[Any, Callable[[Request, Exception], Awaitable[Response]]] = {
    InvalidInput: invalid_input,
    NotFound: not_found,
    Conflict: conflict,
    ValidationError: validation_error,
    HTTPException: http_exception,
    OperationFailed: operation_failed,
    EngramError: engram_error,
}
