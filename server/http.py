"""Small request/response helpers shared by the route modules."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, TypeVar
from urllib.parse import quote

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse

from engine.auth.principal import OPEN, Principal
from engine.errors import InvalidInput, NotFound, TooLarge, Unprocessable
from engine.limits import MAX_BANK_ID_CHARS
from engine.transfer.storage import StoredFile, stream_file
from engine.validation import check_json, check_text, decode_json
from server.services import Services

Model = TypeVar("Model", bound=BaseModel)

MAX_PAGE = 1000


def services_of(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


def principal_of(request: Request) -> Principal:
    """The caller, as server/security.py authenticated it (OPEN when keys are off)."""
    principal: Principal = getattr(request.state, "principal", OPEN)
    return principal


def check_visible(request: Request, bank_id: str, what: str, key: str) -> None:
    """For routes without a bank in the path: a row of a bank the caller cannot see does not
    exist for it (the same 404 as a missing row)."""
    if not principal_of(request).sees(bank_id):
        raise NotFound(what, key)


async def parse_body(request: Request, model: type[Model]) -> Model:
    """The JSON body validated against `model`; an empty body counts as `{}`."""
    return model.model_validate(json_object(await request.body()))


def json_object(raw: bytes) -> dict[str, Any]:
    """A body as a JSON object whose every value passed `check_json`."""
    data = decode_json(raw) if raw.strip() else {}
    if not isinstance(data, dict):
        raise InvalidInput("body", "must be a JSON object")
    check_json(data)
    return data


def path_param(request: Request, name: str) -> str:
    value: str = request.path_params[name]
    check_text(value, name)
    if name == "bank_id" and len(value) > MAX_BANK_ID_CHARS:
        raise TooLarge(name, f"is longer than {MAX_BANK_ID_CHARS} characters", "MAX_BANK_ID_CHARS")
    return value


def text_param(request: Request, name: str) -> str | None:
    """A query parameter as text; missing or empty is None."""
    raw = request.query_params.get(name)
    return check_text(raw, name) if raw else None


def texts_param(request: Request, name: str) -> list[str]:
    """A repeated query parameter (`?tags=a&tags=b`)."""
    return [check_text(raw, name) for raw in request.query_params.getlist(name)]


def uuid_param(request: Request, name: str) -> str | None:
    raw = text_param(request, name)
    if raw is None:
        return None
    try:
        return str(uuid.UUID(raw))
    except ValueError as exc:
        raise Unprocessable(name, "must be a UUID") from exc


def int_param(request: Request, name: str, default: int, low: int = 0, high: int = MAX_PAGE) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError as exc:
        raise InvalidInput(name, "must be an integer") from exc
    if not low <= value <= high:
        raise InvalidInput(name, f"must be between {low} and {high}")
    return value


def bool_param(request: Request, name: str, default: bool = False) -> bool:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    if raw.lower() in ("true", "1", "yes"):
        return True
    if raw.lower() in ("false", "0", "no"):
        return False
    raise InvalidInput(name, "must be true or false")


def choice_param(request: Request, name: str, choices: tuple[str, ...]) -> str | None:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return None
    if raw not in choices:
        raise InvalidInput(name, f"must be one of {', '.join(choices)}")
    return raw


def iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def json_response(body: Any, status_code: int = 200) -> JSONResponse:
    return JSONResponse(body, status_code=status_code)


def stored_file_response(
    services: Services, stored: StoredFile, disposition: str
) -> StreamingResponse:
    """A stored file streamed chunk by chunk from the database."""
    plain = "".join(
        c if c.isascii() and c.isprintable() and c not in '"\\' else "_" for c in stored.filename
    )
    encoded = quote(stored.filename, safe="")
    return StreamingResponse(
        stream_file(services.pool, stored.key),
        media_type=stored.content_type,
        headers={
            "content-disposition": (
                f"{disposition}; filename=\"{plain}\"; filename*=UTF-8''{encoded}"
            ),
            "content-length": str(stored.byte_size),
        },
    )
