"""The console in a real headless Chromium against the real app, worker, PostgreSQL and
Temporal: every page loads with data and without a console error, a retained memory shows
up, a recall draws its trace, the entity graph opens on a click, and the layout holds at
1280×800 and at 390 px. Screenshots land in the test's tmp directory for review."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from playwright.async_api import Browser

from console.browser import Console
from engine.db import Pool
from engine.store.operations import register_operation, update_operation

BANK = "console-demo"
NOTES = [
    ("Kai met Lena in Lisbon to plan the surf trip.", "2024-05-03T10:00:00+00:00"),
    ("Kai and Lena went surfing in Ericeira.", "2024-05-10T09:00:00+00:00"),
    ("Lena adopted a dog named Biscuit.", "2024-06-01T18:00:00+00:00"),
    ("Marco lives in Rome and teaches Italian.", "2024-06-02T12:00:00+00:00"),
]


async def seed(http: httpx.AsyncClient) -> None:
    bank = f"/v1/default/banks/{BANK}"
    response = await http.put(bank, json={"name": "Demo", "mission": "Remember friends."})
    assert response.status_code == 200, response.text
    items = [{"content": text, "timestamp": at, "tags": ["friends"]} for text, at in NOTES]
    response = await http.post(f"{bank}/memories", json={"items": items})
    assert response.status_code == 200, response.text


async def test_every_page_shows_the_bank(browser: Browser, url: str, tmp_path: Path) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        await seed(http)
        context = await browser.new_context(viewport={"width": 1280, "height": 800})
        ui = Console(await context.new_page(), url, tmp_path)
        page = ui.page
        href = f"#/b/{BANK}"

        await ui.open("")
        await page.locator("td a", has_text=BANK).wait_for()
        assert await page.locator("h1").inner_text() == "Banks"
        # Facts by type come from the stats route (nodes_by_fact_type).
        stats = (await http.get(f"/v1/default/banks/{BANK}/stats")).json()
        world = stats["nodes_by_fact_type"]["world"]
        assert world >= len(NOTES)
        row = page.get_by_role("row", name=BANK)
        assert await row.locator("td").nth(2).inner_text() == str(world)
        await ui.shot("banks")

        # The memory browser lists what was retained, and a note retained through the API
        # while the page is open shows up on the next search.
        await page.locator("td a", has_text=BANK).click()
        await page.locator("tbody tr").nth(len(NOTES) - 1).wait_for()
        response = await http.post(
            f"/v1/default/banks/{BANK}/memories",
            json={"items": [{"content": "Kai bought a red surfboard in Ericeira."}]},
        )
        assert response.status_code == 200, response.text
        await page.keyboard.press("/")
        await page.keyboard.type("surfboard")
        await page.locator("tbody tr", has_text="red surfboard").wait_for()
        assert await page.locator("tbody tr").count() == 1
        await ui.shot("memories-search")

        await page.locator("tbody tr a", has_text="red surfboard").click()
        await page.locator(".memory-text").wait_for()
        assert "red surfboard" in await page.locator(".memory-text").inner_text()
        await page.locator("a.chip", has_text="Kai").wait_for()
        await ui.shot("memory")

        # Recall: the results and the trace, arm by arm, with the kept hits marked.
        await ui.open(f"{href}/recall")
        await page.locator("textarea[name=query]").fill("Where did Kai and Lena go surfing?")
        await page.get_by_role("button", name="Recall").click()
        await page.locator("article.result").first.wait_for()
        assert "surf" in (await page.locator("article.result").first.inner_text()).lower()
        assert await page.locator("section.arm").count() >= 2
        assert await page.locator("ol.hits li.kept").count() >= 1
        assert await page.locator("table.fusion tbody tr").count() >= 1
        assert "Found by" in await page.locator("article.result .why").first.inner_text()
        await ui.shot("recall-trace")

        # Reflect without a model: the evidence view, citing memories.
        await ui.open(f"{href}/reflect")
        await page.locator("textarea[name=query]").fill("What do Kai and Lena do together?")
        await page.get_by_role("button", name="Ask").click()
        await page.locator(".answer").wait_for(timeout=60_000)
        assert await page.locator("ol.cited li").count() >= 1
        await ui.shot("reflect")

        # The entity graph: find an entity, then click another node on the canvas.
        await ui.open(f"{href}/graph")
        canvas = page.locator("canvas.graph")
        await canvas.wait_for()
        await page.wait_for_function("document.querySelector('canvas.graph').graphView.step >= 300")
        await page.locator("input[type=search]").fill("Lena")
        await page.keyboard.press("Enter")
        await page.locator(".graph-panel h2", has_text="Lena").wait_for()
        assert await page.locator(".graph-panel ol.facts li").count() >= 2
        point: dict[str, float] = await page.evaluate(
            """() => {
                const view = document.querySelector('canvas.graph').graphView;
                const node = view.nodes.find((n) => n.label === 'Kai');
                return view.toScreen(node);
            }"""
        )
        await canvas.click(position={"x": point["x"], "y": point["y"]})
        await page.locator(".graph-panel h2", has_text="Kai").wait_for()
        await ui.shot("graph")

        # The timeline: click a bar to list its memories.
        await ui.open(f"{href}/timeline")
        await page.locator(".tl-bar:not([disabled])").first.click()
        await page.locator(".timeline-list tbody tr").first.wait_for()
        await ui.shot("timeline")

        for name, heading in [
            ("observations", "Observations"),
            ("models", "Mental models"),
            ("llm", "LLM calls"),
        ]:
            await ui.open(f"{href}/{name}")
            await page.locator("h1", has_text=heading).wait_for()
            await page.locator(".loading").wait_for(state="detached")
            await ui.shot(name)

        # Operations update without a reload: an asynchronous retain appears and completes.
        await ui.open(f"{href}/operations")
        await page.locator("h1", has_text="Operations").wait_for()
        await page.locator(".live").wait_for()
        response = await http.post(
            f"/v1/default/banks/{BANK}/memories",
            json={"async": True, "items": [{"content": "Lena started a pottery class."}]},
        )
        assert response.status_code == 200, response.text
        operation = response.json()["operation_id"]
        await page.wait_for_function(
            """(count) => document.querySelectorAll('main tbody tr').length > count
                && [...document.querySelectorAll('main tbody tr .badge')]
                    .every((b) => b.textContent !== 'pending' && b.textContent !== 'processing')""",
            arg=len(NOTES) - 1,
            timeout=60_000,
        )
        assert operation
        await ui.shot("operations")

        # Dark theme, by keyboard.
        await ui.open(f"{href}/memories")
        await page.locator("tbody tr").first.wait_for()
        await page.keyboard.press("t")
        assert await page.evaluate("document.documentElement.dataset.theme") == "dark"
        await ui.shot("memories-dark")
        await context.close()
        assert ui.errors == []


async def test_pages_fit_a_phone(browser: Browser, url: str, tmp_path: Path) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        await seed(http)
    context = await browser.new_context(viewport={"width": 390, "height": 844})
    ui = Console(await context.new_page(), url, tmp_path)
    page = ui.page
    href = f"#/b/{BANK}"
    await ui.open("")
    await page.locator("td a", has_text=BANK).wait_for()
    await ui.fits()
    await ui.shot("phone-banks")
    await page.get_by_role("button", name="New bank").click()
    await page.locator("select[name=lifecycle_preset]").wait_for()
    await page.locator(".lifecycle summary").click()
    await ui.fits()
    await ui.shot("phone-new-bank")
    await ui.open(f"{href}/memories")
    await page.locator("tbody tr").first.wait_for()
    await ui.fits()
    await ui.shot("phone-memories")
    await page.locator("tbody tr a").first.click()
    await page.locator(".memory-text").wait_for()
    await ui.fits()
    await ui.shot("phone-memory")
    await ui.open(f"{href}/reflect")
    await page.locator("textarea[name=query]").fill("Who lives in Rome?")
    await page.get_by_role("button", name="Ask").click()
    await page.locator(".answer").wait_for(timeout=60_000)
    await ui.fits()
    await ui.shot("phone-reflect")
    await ui.open(f"{href}/recall")
    await page.locator("textarea[name=query]").fill("Who lives in Rome?")
    await page.get_by_role("button", name="Recall").click()
    await page.locator("section.arm").first.wait_for()
    await ui.fits()
    await ui.shot("phone-recall")
    await ui.open(f"{href}/graph")
    await page.wait_for_function("document.querySelector('canvas.graph')?.graphView?.step >= 300")
    await ui.fits()
    await ui.shot("phone-graph")
    await context.close()
    assert ui.errors == []


async def test_the_graph_stays_readable_at_1500_entities(
    browser: Browser, url: str, tmp_path: Path
) -> None:
    """The canvas renderer on a synthetic bank-sized graph: 1,500 entities, hubs and a long
    tail; the layout settles with every node placed, only non-overlapping labels are drawn,
    and a click still selects the node under the pointer."""
    context = await browser.new_context(viewport={"width": 1280, "height": 800})
    ui = Console(await context.new_page(), url, tmp_path)
    page = ui.page
    await ui.open("")
    await page.locator("h1", has_text="Banks").wait_for()
    script = (Path(__file__).parent / "big_graph.js").read_text()
    result: dict[str, Any] = await page.evaluate(script)
    assert result["placed"]
    assert result["onScreen"] == 1500
    assert 5 <= result["labels"] <= 300, result["labels"]
    await page.mouse.click(result["target"]["x"], result["target"]["y"])
    assert await page.evaluate("window.bigGraph.selected?.id") == "e0"
    await ui.shot("graph-1500")
    await context.close()
    assert ui.errors == []


async def test_correct_and_forget_from_the_memory_page(
    browser: Browser, url: str, tmp_path: Path
) -> None:
    """Curation goes through `PATCH .../memories/{id}` (Hindsight's shape), which the
    lifecycle work adds; until the route exists this test has nothing to drive."""
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        await seed(http)
        listed = await http.get(f"/v1/default/banks/{BANK}/memories/list", params={"q": "Biscuit"})
        memory_id = listed.json()["items"][0]["id"]
        probe = await http.patch(f"/v1/default/banks/{BANK}/memories/{memory_id}", json={})
        assert probe.status_code not in (404, 405), probe.text  # the lifecycle's route
        context = await browser.new_context(viewport={"width": 1280, "height": 800})
        ui = Console(await context.new_page(), url, tmp_path)
        page = ui.page
        await ui.open(f"#/b/{BANK}/memory/{memory_id}")
        await page.locator(".memory-text").wait_for()
        await page.locator("textarea[name=text]").fill("Lena adopted a beagle named Biscuit.")
        await page.get_by_role("button", name="Save correction").click()
        await page.locator(".memory-text", has_text="beagle").wait_for()
        page.once("dialog", lambda dialog: dialog.accept())
        await page.get_by_role("button", name="Forget").click()
        await page.get_by_role("button", name="Restore").wait_for()
        body = (await http.get(f"/v1/default/banks/{BANK}/memories/{memory_id}")).json()
        assert body["state"] == "invalidated" and "beagle" in body["text"]
        await ui.shot("forgotten")
        await context.close()
        assert ui.errors == []


async def test_create_configure_and_delete_a_bank(
    browser: Browser, url: str, tmp_path: Path
) -> None:
    made = "made-in-console"
    context = await browser.new_context(viewport={"width": 1280, "height": 800})
    ui = Console(await context.new_page(), url, tmp_path)
    page = ui.page
    await ui.open("")
    await page.locator("h1", has_text="Banks").wait_for()
    await page.get_by_role("button", name="New bank").click()
    form = page.locator("form.bank-form")
    await form.locator("input[name=bank_id]").fill(made)
    await form.locator("textarea[name=mission]").fill("Help the support team.")
    await form.locator("textarea[name=directives]").fill("Never share phone numbers.")
    await form.locator("input[name=skepticism]").fill("5")
    await form.locator("select[name=extraction_mode]").select_option("local")
    # The lifecycle: a preset, and one setting overridden (the preset's value is the hint).
    await form.locator("select[name=lifecycle_preset]").select_option("support")
    await form.locator(".lifecycle summary").click()
    decay = form.locator("input[name='lifecycle.decay_rate']")
    assert await decay.get_attribute("placeholder") == "0.98"
    await decay.fill("0.97")
    await ui.shot("new-bank")
    await form.get_by_role("button", name="Create bank").click()
    await page.locator("h1", has_text="Memories").wait_for()
    await page.locator(".empty", has_text="No memories yet").wait_for()
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        profile = (await http.get(f"/v1/default/banks/{made}/profile")).json()
        assert profile["mission"] == "Help the support team."
        assert profile["disposition"] == {"skepticism": 5, "literalism": 3, "empathy": 3}
        assert profile["config"]["directives"] == ["Never share phone numbers."]
        assert profile["config"]["extraction_mode"] == "local"
        assert profile["config"]["lifecycle_preset"] == "support"
        assert profile["config"]["lifecycle"] == {"decay_rate": 0.97}

        await ui.open("#/banks")  # "" would reopen the last bank used
        await page.get_by_role("row", name=made).get_by_role("button", name="Configure").click()
        form = page.locator("form.bank-form")
        assert await form.locator("input[name=skepticism]").input_value() == "5"
        await form.locator("input[name=empathy]").fill("1")
        await form.get_by_role("button", name="Save").click()
        await page.locator(".toast", has_text=f"Saved {made}").wait_for()
        profile = (await http.get(f"/v1/default/banks/{made}/profile")).json()
        assert profile["disposition"] == {"skepticism": 5, "literalism": 3, "empathy": 1}

        await page.get_by_role("row", name=made).get_by_role("button", name="Delete").click()
        dialog = page.locator("dialog[open]")
        delete = dialog.get_by_role("button", name="Delete")
        assert await delete.is_disabled()
        await dialog.locator("input").fill(made)
        await delete.click()
        await page.locator(".toast", has_text=f"Deleted {made}").wait_for()
        await page.get_by_role("row", name=made).wait_for(state="detached")
        assert (await http.get(f"/v1/default/banks/{made}/profile")).status_code == 404
    await context.close()
    assert ui.errors == []


async def test_a_superseded_memory_shows_its_chain(
    browser: Browser, url: str, tmp_path: Path
) -> None:
    """Retain supersedes "lives in Lisbon" by "lives in Porto" by "lives in Madrid"
    (engine/lifecycle/detect.py); the state filter finds the superseded facts with how long
    they held, and a fact's page shows what it replaced and what replaced it, oldest first."""
    bank = "console-chain"
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        for city, at in [
            ("Lisbon", "2024-01-10"),
            ("Porto", "2024-06-10"),
            ("Madrid", "2024-11-10"),
        ]:
            item = {"content": f"Kai lives in {city}.", "timestamp": f"{at}T10:00:00+00:00"}
            response = await http.post(f"/v1/default/banks/{bank}/memories", json={"items": [item]})
            assert response.status_code == 200, response.text
    context = await browser.new_context(viewport={"width": 1280, "height": 800})
    ui = Console(await context.new_page(), url, tmp_path)
    page = ui.page
    await ui.open(f"#/b/{bank}/memories?state=superseded")
    rows = page.locator("tbody tr")
    await rows.nth(1).wait_for()
    assert await rows.count() == 2
    assert await page.locator("tbody tr", has_text="Madrid").count() == 0
    assert "newer fact" in await page.locator("tbody tr", has_text="Porto").inner_text()
    await ui.shot("memories-superseded")
    await page.locator("tbody tr a", has_text="Porto").click()
    chain = page.locator("ol.chain li")
    await chain.nth(2).wait_for()
    texts = [await chain.nth(i).inner_text() for i in range(3)]
    assert ["Lisbon" in texts[0], "Porto" in texts[1], "Madrid" in texts[2]] == [True] * 3
    assert "this memory" in texts[1]
    history = page.locator("ol.history")
    assert await history.get_by_role("link", name="Replaced by").count() == 1
    assert await history.get_by_role("link", name="Replaces").count() == 1
    await ui.shot("memory-chain")
    await chain.nth(0).get_by_role("link").click()
    await page.locator(".memory-text", has_text="Lisbon").wait_for()
    await context.close()
    assert ui.errors == []


async def test_retry_posts_and_shows_the_answer(
    browser: Browser, url: str, pool: Pool, tmp_path: Path
) -> None:
    """A failed operation's Retry posts `.../operations/{id}/retry` (Hindsight's route, which
    another change serves) and keeps the server's answer on the page, whatever it is."""
    bank = "console-ops"
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        assert (await http.put(f"/v1/default/banks/{bank}", json={})).status_code == 200
    operation_id = "7d0c8f3e-0000-4000-8000-00000000f001"
    async with pool.acquire() as conn:
        await register_operation(conn, operation_id, bank, "retain", f"retain:{bank}:x", "h")
        await update_operation(
            conn, operation_id, "failed", error="extraction failed: model said no"
        )
    context = await browser.new_context(viewport={"width": 1280, "height": 800})
    ui = Console(await context.new_page(), url, tmp_path)
    ui.expected_failures.append(f"/operations/{operation_id}/retry")
    page = ui.page
    await ui.open(f"#/b/{bank}/operations")
    row = page.locator("tbody tr", has_text="model said no")
    async with page.expect_response(lambda r: r.url.endswith("/retry")) as answered:
        await row.get_by_role("button", name="Retry").click()
    response = await answered.value
    assert response.request.method == "POST"
    answer = page.locator(".action-answer [role=status]")
    await answer.wait_for()
    text = await answer.inner_text()
    assert text.startswith(f"Retry {operation_id}: ")
    body = await response.json()
    if response.status == 200:
        assert body["message"] in text
    else:
        assert f"HTTP {response.status}: {body['detail']}" in text
    await ui.shot("operations-retry")
    await context.close()
    assert ui.errors == []
