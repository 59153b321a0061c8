"""The console's files come from the app itself: no separate process, no CDN."""

from __future__ import annotations

import re

import httpx

from server.console_routes import CONSOLE_DIR


async def test_console_is_served_with_its_modules(plain_api: httpx.AsyncClient) -> None:
    for path in ("/", "/console"):
        response = await plain_api.get(path)
        assert response.status_code == 307 and response.headers["location"].endswith("/console/")
    index = await plain_api.get("/console/")
    assert index.status_code == 200 and "text/html" in index.headers["content-type"]
    assert index.headers["cache-control"] == "no-cache"
    # Every module the pages import is served, and none is fetched from another host.
    sources = [p for p in CONSOLE_DIR.rglob("*") if p.suffix in (".js", ".css", ".html")]
    for source in sources:
        text = source.read_text()
        assert not re.search(r"""(src|href|from|import)\s*=?\s*["'(]https?://""", text), source
        relative = source.relative_to(CONSOLE_DIR).as_posix()
        response = await plain_api.get(f"/console/{relative}")
        assert response.status_code == 200, relative
        if source.suffix == ".js":
            assert "javascript" in response.headers["content-type"]
    assert (await plain_api.get("/console/no-such-file.js")).status_code == 404
