"""Schemathesis over every operation `/openapi.json` lists, against a real server URL.

Runs in a thread (its client is synchronous `requests`) while the server answers in the
test's event loop. Each operation gets a few positive cases, and a few negative ones when its
input can be invalid at all (a body, or a query parameter that is more than free text: on
the others Hypothesis searches ~9 s per operation before giving up). Cases come from a fixed
seed, without shrinking; a failure is recorded and the run goes on, so one run reports every
operation that misbehaves.

An answer fails when it is a 5xx the operation does not document (the 501 of an operation
Engram deliberately does not serve is documented), or when its status, content type or body
is not the documented one."""

from __future__ import annotations

import time
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

import hypothesis
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given
from hypothesis.errors import Unsatisfiable
from schemathesis import Case, GenerationMode
from schemathesis.core.failures import FailureGroup
from schemathesis.core.result import Ok
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

CHECKS = [status_code_conformance, content_type_conformance, response_schema_conformance]
FREE_TEXT_KEYS = {"type", "title", "description", "default"}


@dataclass
class FuzzRun:
    """What one run saw: requests sent per operation, the first failure of each, the
    operations left when the time budget ran out, and seconds spent per operation."""

    requests: dict[str, int] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)


def negatable(operation: dict[str, Any]) -> bool:
    """Whether some request to the operation can break its schema (path parameters are free
    text in Engram's document, so only bodies and constrained query parameters can)."""
    if "requestBody" in operation:
        return True
    for parameter in operation.get("parameters", []):
        schema = parameter["schema"]
        free = set(schema) <= FREE_TEXT_KEYS and schema.get("type") == "string"
        if parameter["in"] == "query" and not free:
            return True
    return False


def fuzz_api(
    doc: dict[str, Any],
    base_url: str,
    *,
    examples: int,
    seed: int,
    budget_s: float,
    fixed_path: dict[str, str] | None = None,
    spare: frozenset[tuple[str, str]] = frozenset(),
) -> FuzzRun:
    """`examples` positive and (where possible) `examples` negative cases per operation.
    Positive cases use the `fixed_path` values (a real bank, so they reach past the 404)
    except on the operations in `spare` (method, path), which would destroy them. Past
    `budget_s` the remaining operations are listed in `skipped` instead of run."""
    schema = schemathesis.openapi.from_dict(doc)
    run = FuzzRun()
    deadline = time.monotonic() + budget_s
    with requests.Session() as session:
        for result in schema.get_all_operations():
            assert isinstance(result, Ok), f"the document is not usable: {result}"
            operation = result.ok()
            method, path = operation.method.upper(), operation.path
            label = f"{method} {path}"
            if time.monotonic() > deadline:
                run.skipped.append(label)
                continue
            started = time.monotonic()
            names = {p.name for p in operation.path_parameters}
            pinned = {k: v for k, v in (fixed_path or {}).items() if k in names}
            if (method, path) in spare:
                pinned = {}
            documented = set(doc["paths"][path][method.lower()]["responses"])
            cases = [operation.as_strategy(GenerationMode.POSITIVE, path_parameters=pinned)]
            if negatable(doc["paths"][path][method.lower()]):
                cases.append(operation.as_strategy(GenerationMode.NEGATIVE))
            for strategy in cases:
                _run_cases(strategy, label, documented, session, base_url, examples, seed, run)
            run.seconds[label] = time.monotonic() - started
    return run


def _run_cases(
    strategy: Any,
    label: str,
    documented: set[str],
    session: requests.Session,
    base_url: str,
    examples: int,
    seed: int,
    run: FuzzRun,
) -> None:
    @hypothesis.seed(seed)
    @hypothesis.settings(
        max_examples=examples,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def one(case: Case[Any]) -> None:
        if label in run.failures:
            return
        run.requests[label] = run.requests.get(label, 0) + 1
        try:
            response = case.call(base_url=base_url, session=session, timeout=120)
            status = response.status_code
            if status >= 500 and str(status) not in documented:
                raise AssertionError(f"answered {status}: {response.text[:2000]}")
            case.validate_response(response, checks=CHECKS)
        except (FailureGroup, Exception) as exc:  # recorded: the run goes on to the others
            run.failures[label] = f"{case.as_curl_command()}\n{_describe(exc)}"

    with suppress(Unsatisfiable):  # every generated case was filtered out: nothing to send
        one()


def _describe(exc: BaseException) -> str:
    if isinstance(exc, FailureGroup):
        return "\n".join(str(failure) for failure in exc.exceptions)
    return f"{type(exc).__name__}: {exc}"
