"""Checking a real answer against Engram's own OpenAPI document."""

from __future__ import annotations

import re
from typing import Any

import httpx
from jsonschema import Draft202012Validator


def operation_for(doc: dict[str, Any], method: str, path: str) -> dict[str, Any]:
    for template, methods in doc["paths"].items():
        pattern = "^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(template)) + "$"
        if re.match(pattern, path) and method.lower() in methods:
            found: dict[str, Any] = methods[method.lower()]
            return found
    raise AssertionError(f"{method} {path} is not in the document")


def check(doc: dict[str, Any], response: httpx.Response) -> dict[str, Any]:
    """The answer's status is documented and its body matches the documented schema."""
    request = response.request
    operation = operation_for(doc, request.method, request.url.path)
    status = str(response.status_code)
    assert status in operation["responses"], (status, response.text)
    schema = operation["responses"][status]["content"]["application/json"]["schema"]
    assert schema, f"{request.method} {request.url.path} has no typed answer"
    validator = Draft202012Validator({**schema, "components": doc["components"]})
    body: dict[str, Any] = response.json()
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(body)]
    assert not errors, f"{request.method} {request.url.path}: {errors}"
    return body
