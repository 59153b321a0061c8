"""The reflect page with a (scripted) model: the agent's steps appear while it works — the
model is held on its second turn until the page shows the first tool call — then the answer
replaces them."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.async_api import Browser
from support.fake_openai import FakeOpenAI, Reply, Spec, ToolCall, ToolCalls

from console.browser import Console
from engine.settings import LLMSettings

BANK = "console-reflect"
GATE = threading.Event()


def held_answer(request: dict[str, Any]) -> Spec:
    GATE.wait(60)
    return Reply("Kai and Lena surf together in Ericeira.")


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(responder=held_answer) as server:
        yield server
        GATE.set()


@pytest.fixture
def llm_settings(fake: FakeOpenAI) -> LLMSettings:
    return LLMSettings(api_key="test-key", base_url=fake.base_url, model="fake", timeout_s=90)


async def test_reflect_shows_the_steps_while_the_agent_works(
    browser: Browser, url: str, fake: FakeOpenAI, tmp_path: Path
) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        bank = f"/v1/default/banks/{BANK}"
        config = {"extraction_mode": "local", "enable_observations": False}
        assert (await http.put(bank, json=config)).status_code == 200
        item = {"content": "Kai and Lena went surfing in Ericeira.", "timestamp": "2024-05-10"}
        assert (await http.post(f"{bank}/memories", json={"items": [item]})).status_code == 200
    fake.push(ToolCalls((ToolCall("recall", json.dumps({"query": "Kai Lena surfing"})),)))
    context = await browser.new_context(viewport={"width": 1280, "height": 800})
    ui = Console(await context.new_page(), url, tmp_path)
    page = ui.page
    try:
        await ui.open(f"#/b/{BANK}/reflect")
        await page.locator("textarea[name=query]").fill("What do Kai and Lena do together?")
        await page.keyboard.press("Control+Enter")
        live = page.locator(".live-steps")
        await live.locator("ol.steps li", has_text="recall").wait_for(timeout=60_000)
        assert "turn 2" in await live.inner_text() or "thinking" in await live.inner_text()
        await ui.shot("reflect-live")
    finally:
        GATE.set()
    await page.locator(".answer", has_text="surf together").wait_for(timeout=60_000)
    assert await page.locator(".live-steps").count() == 0
    steps = page.locator("ol.steps li")
    assert await steps.count() == 1 and "recall" in await steps.first.inner_text()
    await ui.shot("reflect-answer")
    await context.close()
    assert ui.errors == []
