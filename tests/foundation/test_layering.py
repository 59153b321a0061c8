"""engine/ is the memory itself: it never imports the Temporal, HTTP or metrics layers."""

from __future__ import annotations

import ast
from pathlib import Path

FORBIDDEN = (
    "temporalio",
    "starlette",
    "prometheus_client",
    "uvicorn",
    "server",
    "worker",
    "activities",
    "workflows",
    "engram",
)


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


def test_engine_imports_no_outer_layer() -> None:
    engine = Path(__file__).resolve().parents[2] / "engine"
    offenders = {
        str(path.relative_to(engine.parent)): sorted(imported_modules(path) & set(FORBIDDEN))
        for path in engine.rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}
    assert len(offenders) > 10  # the scan really looked at the engine
