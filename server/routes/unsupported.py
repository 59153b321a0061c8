"""Hindsight operations Engram does not serve, each answering 501 with what to use instead.

`UNSUPPORTED` holds the deliberate decisions (docs/wire-format.md §14 explains them);
`PENDING` the operations another open issue builds. Both are registered after every real
route, so a route that lands for the same path and method takes over without touching this
table — and the coverage test (tests/api/test_coverage.py) then asks for the entry's removal.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from server.http import json_response
from server.openapi import ApiRoute, Endpoint
from server.responses import NotImplementedResponse

BANK = "/v1/default/banks/{bank_id}"
KNOWLEDGE_BASE = "knowledge-base pages are not part of Engram; mental models hold standing pages"
MENTAL_MODELS = f"{BANK}/mental-models"
NO_ALIASES = "banks have one id; there are no aliases"

# (method, path) -> (why, what to use instead)
UNSUPPORTED: dict[tuple[str, str], tuple[str, str]] = {
    ("GET", f"{BANK}/knowledge-base/tree"): (KNOWLEDGE_BASE, f"GET {MENTAL_MODELS}"),
    ("POST", f"{BANK}/knowledge-base/folders"): (KNOWLEDGE_BASE, "tags on mental models"),
    ("POST", f"{BANK}/knowledge-base/pages"): (KNOWLEDGE_BASE, f"POST {MENTAL_MODELS}"),
    ("GET", f"{BANK}/knowledge-base/pages/{{page_id}}"): (
        KNOWLEDGE_BASE,
        f"GET {MENTAL_MODELS}/{{id}}",
    ),
    ("PATCH", f"{BANK}/knowledge-base/nodes/{{node_id}}"): (
        KNOWLEDGE_BASE,
        f"PATCH {MENTAL_MODELS}/{{id}}",
    ),
    ("DELETE", f"{BANK}/knowledge-base/nodes/{{node_id}}"): (
        KNOWLEDGE_BASE,
        f"DELETE {MENTAL_MODELS}/{{id}}",
    ),
    ("GET", f"{BANK}/knowledge-base/search"): (KNOWLEDGE_BASE, f"GET {MENTAL_MODELS}"),
    ("GET", f"{BANK}/knowledge-base/export"): (KNOWLEDGE_BASE, f"GET {MENTAL_MODELS}?detail=full"),
    ("GET", "/v1/bank-template-schema"): (
        "bank templates are not supported",
        f"PUT {BANK} and PATCH {BANK}/config",
    ),
    ("GET", f"{BANK}/aliases"): (NO_ALIASES, f"GET {BANK}/profile"),
    ("POST", f"{BANK}/aliases"): (NO_ALIASES, f"PUT {BANK}"),
    ("PATCH", f"{BANK}/aliases/{{alias}}"): (
        NO_ALIASES,
        f"PUT {BANK}",
    ),
    ("DELETE", f"{BANK}/aliases/{{alias}}"): (
        NO_ALIASES,
        f"DELETE {BANK}",
    ),
    ("POST", f"{BANK}/consolidation-strategies/preview"): (
        "consolidation has one strategy, not a configurable one",
        f"GET {BANK}/consolidation",
    ),
    ("POST", f"{BANK}/prompts/preview"): (
        "prompts are not templates a bank configures",
        f"PATCH {BANK}/config (retain_mission, directives)",
    ),
    ("POST", f"{BANK}/consolidation/recover"): (
        "consolidation runs as a Temporal workflow that retries by itself",
        f"POST {BANK}/consolidate",
    ),
    ("GET", f"{BANK}/observations/scopes"): (
        "observations are consolidated per bank, not per scope",
        f"GET {BANK}/memories/list?type=observation",
    ),
}

# (method, path) -> the open issue that builds it
PENDING: dict[tuple[str, str], int] = {}


class NotServed(ApiRoute):
    """A 501 placeholder; the coverage test tells these from real routes."""


def _answer(detail: str, instead: str | None) -> Endpoint:
    async def not_implemented(request: Request) -> Response:
        body: dict[str, str] = {"detail": detail}
        if instead is not None:
            body["use_instead"] = instead
        return json_response(body, status_code=501)

    return not_implemented


def routes() -> list[BaseRoute]:
    found: list[BaseRoute] = []
    for (method, path), (why, instead) in UNSUPPORTED.items():
        detail = f"{method} {path} is not supported: {why}; use {instead}"
        found.append(_placeholder(method, path, detail, instead, "unsupported"))
    for (method, path), issue in PENDING.items():
        detail = f"{method} {path} is not implemented yet (issue {issue})"
        found.append(_placeholder(method, path, detail, None, "pending"))
    return found


def _placeholder(method: str, path: str, detail: str, instead: str | None, tag: str) -> NotServed:
    return NotServed(
        path,
        _answer(detail, instead),
        methods=[method],
        tag=tag,
        summary=detail,
        response=NotImplementedResponse,
        status=501,
    )
