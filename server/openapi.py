"""The OpenAPI 3.1 document, built from the routes themselves.

Routes that name their models are `ApiRoute`s (a Starlette `Route` plus the pydantic models of
its body, query and answer), so the document and the server read one table: a model changed
for validation changes the document, and a test checks real answers against it. Plain
`Route`s still appear, with an untyped answer.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema
from starlette.routing import BaseRoute, Mount, Route

from server.security import BODY_METHODS, PUBLIC_PATHS, READING_POSTS

Endpoint = Callable[..., Any]
SCHEMA_REF = "#/components/schemas/{model}"
ERROR_STATUSES = {
    "400": "Invalid input; `field` names the offending field",
    "404": "Unknown bank or resource",
    "409": "The resource's state does not allow this now (e.g. an operation still running)",
    "422": "The body does not match the schema; `errors` lists each field",
}
# Answered by the middleware in front of every route but the public probes
# (server/security.py, server/middleware.py).
GUARDED_STATUSES = {
    "401": "No API key, or an invalid one, where keys are required (ENGRAM_AUTH)",
    "403": "The key's scope or bank does not allow this",
    "429": "The key's rate limit is exceeded; Retry-After says when to try again",
    "503": "The server is busy or a dependency is unavailable; Retry-After says when to retry",
}
# Routes that take a body.
BODY_STATUSES = {
    "413": "The body exceeds ENGRAM_MAX_BODY_BYTES (archive imports: ENGRAM_MAX_ARCHIVE_BYTES)",
    "415": "The content-type is not application/json (or multipart for uploads)",
}
# Routes that write: nothing of the request is kept.
WRITE_STATUSES = {"507": "The database is out of disk; nothing of this request was kept"}


class ErrorResponse(BaseModel):
    detail: Any
    field: str | None = None


class ApiRoute(Route):
    """A route that names its models: `body` validates the request, `query` describes the query
    string, `response` the answer (`status` is its code, `response_media` its media type when
    it is not JSON); `tag` groups it in the document."""

    def __init__(
        self,
        path: str,
        endpoint: Endpoint,
        *,
        methods: list[str],
        tag: str,
        summary: str,
        body: type[BaseModel] | None = None,
        query: type[BaseModel] | None = None,
        response: type[BaseModel] | None = None,
        status: int = 200,
        body_media: Literal["application/json", "multipart/form-data"] = "application/json",
        response_media: str = "application/json",
    ) -> None:
        super().__init__(path, endpoint, methods=methods)
        self.tag = tag
        self.summary = summary
        self.body = body
        self.query = query
        self.response = response
        self.status = status
        self.body_media = body_media
        self.response_media = response_media


def walk(routes: Sequence[BaseRoute], prefix: str = "") -> list[tuple[str, Route]]:
    """Every `Route` with its full path (mounts are entered; their own apps are not)."""
    found: list[tuple[str, Route]] = []
    for route in routes:
        if isinstance(route, Mount):
            found.extend(walk(route.routes, prefix + route.path))
        elif isinstance(route, Route) and route.include_in_schema:
            found.append((prefix + route.path_format, route))
    return found


def _operation_id(route: Route, method: str, path: str, taken: set[str]) -> str:
    base = getattr(route.endpoint, "__name__", "endpoint")
    candidate = f"{base}_{method.lower()}"
    if candidate in taken:
        slug = re.sub(r"[^a-z0-9]+", "_", path.lower()).strip("_")
        candidate = f"{slug}_{method.lower()}"
    taken.add(candidate)
    return candidate


def _models(routes: list[tuple[str, Route]]) -> list[tuple[type[BaseModel], JsonSchemaMode]]:
    wanted: dict[tuple[type[BaseModel], JsonSchemaMode], None] = {
        (ErrorResponse, "serialization"): None
    }
    for _, route in routes:
        if isinstance(route, ApiRoute):
            if route.body is not None:
                wanted[(route.body, "validation")] = None
            if route.query is not None:
                wanted[(route.query, "validation")] = None
            if route.response is not None:
                wanted[(route.response, "serialization")] = None
    return list(wanted)


def _query_parameters(model: type[BaseModel], schema: dict[str, Any]) -> list[dict[str, Any]]:
    props: dict[str, Any] = schema.get("properties", {})
    required = set(schema.get("required", ()))
    params = []
    for name, prop in props.items():
        param: dict[str, Any] = {
            "name": name,
            "in": "query",
            "required": name in required,
            "schema": prop,
        }
        description = model.model_fields[name].description if name in model.model_fields else None
        if description:
            param["description"] = description
        if prop.get("type") == "array" or "array" in str(prop.get("anyOf", "")):
            param["explode"] = True
        params.append(param)
    return params


def openapi_document(routes: Sequence[BaseRoute], version: str) -> dict[str, Any]:
    found = walk(routes)
    key_map, defs = models_json_schema(_models(found), ref_template=SCHEMA_REF)
    schemas: dict[str, Any] = defs.get("$defs", {})
    paths: dict[str, dict[str, Any]] = {}
    taken: set[str] = set()
    for path, route in found:
        for method in sorted((route.methods or set()) - {"HEAD"}):
            paths.setdefault(path, {})[method.lower()] = _operation(
                route, method, path, key_map, schemas, taken
            )
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Engram",
            "version": version,
            "description": "Long-term memory for AI agents, speaking Hindsight's v1 wire format.",
        },
        "paths": paths,
        "components": {"schemas": schemas},
    }


def _operation(
    route: Route,
    method: str,
    path: str,
    key_map: Mapping[Any, dict[str, Any]],
    schemas: dict[str, Any],
    taken: set[str],
) -> dict[str, Any]:
    op: dict[str, Any] = {"operationId": _operation_id(route, method, path, taken)}
    parameters: list[dict[str, Any]] = [
        {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
        for name in route.param_convertors
    ]
    answer: dict[str, Any] = {}
    status = "200"
    media = "application/json"
    if isinstance(route, ApiRoute):
        op["tags"] = [route.tag]
        op["summary"] = route.summary
        status = str(route.status)
        media = route.response_media
        if not media.endswith("json"):
            answer = {"type": "string"}
        if route.query is not None:
            ref = key_map[(route.query, "validation")]["$ref"]
            parameters.extend(_query_parameters(route.query, schemas[ref.rsplit("/", 1)[1]]))
        if route.body is not None:
            op["requestBody"] = {
                "required": route.body_media == "multipart/form-data",
                "content": {route.body_media: {"schema": key_map[(route.body, "validation")]}},
            }
        if route.response is not None:
            answer = key_map[(route.response, "serialization")]
    else:
        op["tags"] = ["monitoring" if not path.startswith("/v1/") else "other"]
    if parameters:
        op["parameters"] = parameters
    error_ref = key_map[(ErrorResponse, "serialization")]
    op["responses"] = {
        status: {"description": "Success", "content": {media: {"schema": answer}}},
        **{
            code: {"description": text, "content": {"application/json": {"schema": error_ref}}}
            for code, text in error_statuses(method, path).items()
            if code != status
        },
    }
    return op


def error_statuses(method: str, path: str) -> dict[str, str]:
    """Every error a route can answer, with what it means."""
    if path in PUBLIC_PATHS:
        return dict(ERROR_STATUSES)
    statuses = {**ERROR_STATUSES, **GUARDED_STATUSES}
    if method in BODY_METHODS:
        statuses |= BODY_STATUSES
        if not path.endswith(READING_POSTS):
            statuses |= WRITE_STATUSES
    return dict(sorted(statuses.items()))
