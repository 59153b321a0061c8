"""One headless Chromium for the session (Debian's package, never a downloaded browser), and
the real app with a worker served on a loopback port for it to open."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator

import pytest
from playwright.async_api import Browser, async_playwright
from starlette.applications import Starlette
from support.serve import serve
from temporalio.worker import Worker

CHROMIUM = "/usr/bin/chromium"
# Headless in a container: no sandbox (no user namespaces), no /dev/shm limits, no GPU.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--headless=new"]


def chromium_path() -> str | None:
    if os.path.exists(CHROMIUM):
        return CHROMIUM
    return shutil.which("chromium")


@pytest.fixture(scope="session")
async def browser() -> AsyncIterator[Browser]:
    path = chromium_path()
    if path is None:
        message = "chromium is not installed (apt-get install -y chromium; .ci/run does it)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        yield launched
        await launched.close()


@pytest.fixture
async def url(app: Starlette, worker: Worker) -> AsyncIterator[str]:
    async with serve(app) as base:
        yield base
