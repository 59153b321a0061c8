"""The CLI tests' API: the real app served on a loopback port, with a worker behind it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from starlette.applications import Starlette
from support.serve import serve
from temporalio.worker import Worker


@pytest.fixture
async def url(
    app: Starlette, worker: Worker, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[str]:
    async with serve(app) as base:
        monkeypatch.setenv("ENGRAM_URL", base)
        monkeypatch.delenv("ENGRAM_BANK", raising=False)
        yield base
