"""The console against a server that requires API keys (ENGRAM_AUTH=keys): the pages load
without one, the first 401 from the API asks for a key, and the key is then sent."""

from __future__ import annotations

from pathlib import Path

import pytest
from argon2 import PasswordHasher
from playwright.async_api import Browser, ConsoleMessage, Request

from engine.auth.keys import create_key
from engine.db import Pool
from engine.settings import LLMSettings, SecuritySettings, Settings

# Cheap hashing parameters: the test checks the flow, not argon2's cost.
HASHER = PasswordHasher(time_cost=1, memory_cost=8, parallelism=1)


@pytest.fixture
def settings(
    tmp_path: Path, database_url: str, task_queue: str, llm_settings: LLMSettings
) -> Settings:
    return Settings(
        home=tmp_path,
        database_url=database_url,
        task_queue=task_queue,
        llm=llm_settings,
        security=SecuritySettings(auth="keys"),
    )


async def test_a_401_asks_for_a_key_and_the_key_is_sent(
    browser: Browser, url: str, pool: Pool, tmp_path: Path
) -> None:
    async with pool.acquire() as conn:
        _, token = await create_key(conn, HASHER, bank_id=None, scope="admin")
    context = await browser.new_context(viewport={"width": 1280, "height": 800})
    page = await context.new_page()
    errors: list[str] = []
    sent: list[str | None] = []

    def on_console(message: ConsoleMessage) -> None:
        # The browser logs every 401 it receives; those are the point of this test.
        if message.type == "error" and "401" not in message.text:
            errors.append(message.text)

    def on_request(request: Request) -> None:
        if "/v1/" in request.url:
            sent.append(request.headers.get("authorization"))

    page.on("console", on_console)
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("request", on_request)
    await page.goto(f"{url}/console/")
    dialog = page.locator("#key-dialog")
    await dialog.wait_for()
    assert "401" in await dialog.inner_text()
    await page.locator("#key-input").fill(token)
    await page.get_by_role("button", name="Save").click()
    await page.locator("h1", has_text="Banks").wait_for()
    await page.locator(".loading").wait_for(state="detached")
    assert await page.locator(".error").count() == 0
    assert sent[0] is None and sent[-1] == f"Bearer {token}"
    assert await page.evaluate("localStorage.getItem('engram.apiKey')") == token
    await page.screenshot(path=str(tmp_path / "key.png"))
    await context.close()
    assert errors == []
