"""Every operation of Hindsight's reference OpenAPI document and of hindsight-client 1.1 is
served, deliberately unsupported (501 naming what to use instead, listed in
docs/wire-format.md), or pending with the issue that builds it."""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
import re
from pathlib import Path

import hindsight_client_api.api
import httpx
from starlette.applications import Starlette

from server.openapi import walk
from server.routes.unsupported import PENDING, UNSUPPORTED, NotServed

REFERENCE = Path("/work/shared/reference/hindsight-openapi-0.9.1.json")
METHODS = ("get", "post", "put", "patch", "delete")
Operation = tuple[str, str]


def shape(path: str) -> str:
    """Path parameters' names differ between the documents and our routes ({id} and
    {mental_model_id}): compare the shapes."""
    return re.sub(r"\{[^}]+\}", "{}", path)


def reference_operations() -> set[Operation]:
    """The reference document lives outside the repository (it is Hindsight's text); every
    operation in it is also in the client's list, so a machine without it still checks all."""
    if not REFERENCE.exists():
        return set()
    doc = json.loads(REFERENCE.read_text())
    return {(m.upper(), shape(p)) for p, ms in doc["paths"].items() for m in ms if m in METHODS}


def client_operations() -> set[Operation]:
    found: set[Operation] = set()
    for module in pkgutil.iter_modules(hindsight_client_api.api.__path__):
        text = inspect.getsource(importlib.import_module(f"hindsight_client_api.api.{module.name}"))
        for method, path in re.findall(r"method='(\w+)',\s*resource_path='([^']+)'", text):
            found.add((method, shape(path)))
    return found


def served_operations(app: Starlette) -> set[Operation]:
    return {
        (method, shape(path))
        for path, route in walk(app.routes)
        if not isinstance(route, NotServed)
        for method in route.methods or ()
    }


def test_every_operation_is_served_or_accounted_for(app: Starlette) -> None:
    wanted = reference_operations() | client_operations()
    assert len(wanted) >= 100  # both lists were really read
    served = served_operations(app)
    unsupported = {(m, shape(p)) for m, p in UNSUPPORTED}
    pending = {(m, shape(p)) for m, p in PENDING}
    missing = sorted(wanted - served - unsupported - pending)
    assert missing == [], f"neither served nor listed: {missing}"
    assert sorted((unsupported | pending) & served) == [], "served now: drop from the tables"
    assert sorted((unsupported | pending) - wanted) == []
    wire_format = (Path(__file__).resolve().parents[2] / "docs" / "wire-format.md").read_text()
    undocumented = [f"{m} {p}" for m, p in UNSUPPORTED if f"`{m} {p}`" not in wire_format]
    assert undocumented == [], "list each decision in docs/wire-format.md §14"


async def test_unsupported_and_pending_answer_501(plain_api: httpx.AsyncClient) -> None:
    kb = await plain_api.get("/v1/default/banks/b1/knowledge-base/tree")
    assert kb.status_code == 501
    assert "mental-models" in kb.json()["use_instead"] and "not supported" in kb.json()["detail"]
    for (method, path), issue in list(PENDING.items())[:1]:
        concrete = re.sub(r"\{[a-z_]+\}", "x1", path)
        pending = await plain_api.request(method, concrete, json={})
        assert pending.status_code == 501 and f"issue {issue}" in pending.json()["detail"]
