"""A console page under test: records console errors and saves numbered screenshots."""

from __future__ import annotations

from pathlib import Path

from playwright.async_api import ConsoleMessage, Error, Page


class Console:
    """A page that records console errors and saves numbered screenshots."""

    def __init__(self, page: Page, base: str, shots: Path) -> None:
        self.page = page
        self.base = base
        self.shots = shots
        self.errors: list[str] = []
        # The browser logs every non-2xx answer as an error; a test that expects one names
        # the URL part it expects it from.
        self.expected_failures: list[str] = []
        self.count = 0
        page.on("console", self._console)
        page.on("pageerror", self._page_error)

    def _console(self, message: ConsoleMessage) -> None:
        source = message.location.get("url", "")
        if any(part in source for part in self.expected_failures):
            return
        if message.type == "error":
            self.errors.append(f"{self.page.url}: {message.text}")

    def _page_error(self, error: Error) -> None:
        self.errors.append(f"{self.page.url}: uncaught {error}")

    async def open(self, fragment: str) -> None:
        await self.page.goto(f"{self.base}/console/{fragment}")

    async def shot(self, name: str) -> None:
        self.count += 1
        path = self.shots / f"{self.count:02d}-{name}.png"
        await self.page.screenshot(path=str(path), full_page=True)

    async def fits(self) -> None:
        """Nothing wider than the viewport (the page itself never scrolls sideways)."""
        width = await self.page.evaluate("document.documentElement.scrollWidth")
        viewport = await self.page.evaluate("window.innerWidth")
        assert width <= viewport, f"{self.page.url} is {width}px wide in a {viewport}px window"
