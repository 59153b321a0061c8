"""The console's graphs at scale: the two graph routes over a synthetic bank, and the entity
graph's canvas layout in headless chromium.

    .venv/bin/python -m bench.console_graph                     # both parts, 20k facts
    .venv/bin/python -m bench.console_graph --facts 5000 --no-browser
    .venv/bin/python -m bench.console_graph --no-routes --entities 500,1500,5000

Routes: the bank is bench/recall_latency.py's synthetic one (retain's own steps without
Temporal; Zipf-like names, so a few entities co-occur with thousands of facts), built once
into `--data-dir` and reused. `GET .../entities/graph` and `GET .../graph` (limit 1000 each)
are timed through the real Starlette app over httpx's ASGI transport, `--repeat` times after
one warm-up; client-side wall time.

Layout: `server/console/graph-canvas.js` in Debian's chromium (`/usr/bin/chromium`) on a
synthetic co-occurrence graph per `--entities` size (communities of ~50 around hub entities,
a third of the entities with a second link to any earlier one): milliseconds per simulation
step (median of the 300), time until the layout has settled (steps run 2-3 per animation
frame, so this includes frame pacing), and milliseconds per full redraw (median of 20).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Final

import httpx
from playwright.async_api import Route, async_playwright

from bench.in_process import lazy_temporal, never
from bench.recall_latency import (
    BANK,
    DAYS,
    SEED,
    START,
    bank_counts,
    build_bank,
)
from bench.synthetic_facts import generate_facts
from engine.db import create_pool, migrate
from engine.embedding import load_embedder
from engine.settings import Settings
from engram.postgres import EmbeddedPostgres
from server.app import create_app
from server.console_routes import CONSOLE_DIR
from server.services import CPU_THREADS, Services

CHROMIUM: Final = "/usr/bin/chromium"
DEFAULT_DATA_DIR: Final = Path.home() / ".cache" / "engram-bench" / "console-graph"
ORIGIN: Final = "http://bench.local"

LAYOUT_JS: Final = """
async (size) => {
  const { GraphView } = await import('/console/graph-canvas.js');
  const canvas = document.createElement('canvas');
  canvas.style = 'position:fixed;inset:0;width:1280px;height:800px';
  document.body.append(canvas);
  let seed = 11;
  const random = () => (seed = (seed * 16807) % 2147483647) / 2147483647;
  const hubs = Math.max(2, Math.round(size / 50));
  const nodes = [];
  const edges = [];
  for (let i = 0; i < size; i++) {
    nodes.push({ id: 'e' + i, label: 'Entity ' + i, weight: 1 + Math.floor(500 / (i + 1)),
                 group: String(i % 3) });
    if (i >= hubs) {
      const weight = 1 + Math.floor(random() * 4);
      edges.push({ source: 'e' + i, target: 'e' + (i % hubs), weight });
      if (random() < 0.33) {
        edges.push({ source: 'e' + i, target: 'e' + Math.floor(random() * i), weight: 1 });
      }
    } else if (i > 0) {
      edges.push({ source: 'e' + i, target: 'e' + Math.floor(random() * i), weight: 2 });
    }
  }
  const started = performance.now();
  const view = new GraphView(canvas, nodes, edges, {});
  const simulate = view.simulate.bind(view);
  const steps = [];
  view.simulate = () => {
    const t = performance.now();
    simulate();
    steps.push(performance.now() - t);
  };
  while (view.step < 300) await new Promise((r) => requestAnimationFrame(r));
  const settled = performance.now() - started;
  const draws = [];
  for (let k = 0; k < 20; k++) {
    const t = performance.now();
    view.draw();
    draws.push(performance.now() - t);
  }
  const median = (xs) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  view.destroy();
  canvas.remove();
  return { entities: size, edges: edges.length, step_ms: median(steps), settle_ms: settled,
           draw_ms: median(draws) };
}
"""


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def time_routes(database_url: str, facts: int, repeat: int) -> dict[str, Any]:
    embedder = load_embedder("minilm")
    await migrate(database_url, embedder.dimension, embedder.space)
    pool = await create_pool(database_url, max_size=4)
    cpu = ThreadPoolExecutor(CPU_THREADS, thread_name_prefix="bench-cpu")
    try:
        synthetic, _ = generate_facts(facts, seed=SEED, start=START, days=DAYS)
        await build_bank(pool, embedder, cpu, synthetic)
        counts = await bank_counts(pool)
        print("bank:", ", ".join(f"{k} {v:,}" for k, v in counts.items()), flush=True)
        settings = Settings(home=Path("."), database_url=database_url)
        app = create_app(never)
        app.state.services = Services(settings, pool, await lazy_temporal(), embedder, cpu)
        figures: dict[str, Any] = {"facts": counts["facts"], "entities": counts["entities"]}
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://engram.bench") as http:
            for name, path in (
                ("entities_graph", f"/v1/default/banks/{BANK}/entities/graph?limit=1000"),
                ("memory_graph", f"/v1/default/banks/{BANK}/graph?limit=1000"),
            ):
                timings: list[float] = []
                body: dict[str, Any] = {}
                for attempt in range(repeat + 1):
                    started = time.perf_counter()
                    response = await http.get(path, timeout=120)
                    elapsed = (time.perf_counter() - started) * 1000
                    response.raise_for_status()
                    body = response.json()
                    if attempt:  # the first is a warm-up
                        timings.append(elapsed)
                figures[name] = {
                    "nodes": len(body["nodes"]),
                    "edges": len(body["edges"]),
                    "total": body.get("total_edges", body.get("total_units")),
                    "p50_ms": round(_percentile(timings, 0.5), 1),
                    "p95_ms": round(_percentile(timings, 0.95), 1),
                }
                print(f"{name}: {figures[name]}", flush=True)
        return figures
    finally:
        cpu.shutdown(wait=False, cancel_futures=True)
        await pool.close()


async def _serve_console(route: Route) -> None:
    relative = route.request.url.removeprefix(ORIGIN + "/console/")
    path = CONSOLE_DIR / relative
    if relative and path.is_file():
        await route.fulfill(path=str(path), content_type="text/javascript")
    else:
        await route.fulfill(body="<!doctype html><body></body>", content_type="text/html")


async def time_layout(sizes: list[int]) -> list[dict[str, Any]]:
    results = []
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--headless=new"]
        )
        page = await browser.new_page(viewport={"width": 1280, "height": 800})
        await page.route(ORIGIN + "/**", _serve_console)
        await page.goto(ORIGIN + "/console/")
        for size in sizes:
            result: dict[str, Any] = await page.evaluate(LAYOUT_JS, size)
            result = {k: round(v, 2) if isinstance(v, float) else v for k, v in result.items()}
            print(f"layout: {result}", flush=True)
            results.append(result)
        await browser.close()
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--facts", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=20, help="timed requests per route")
    parser.add_argument("--entities", default="500,1500,5000", help="layout sizes")
    parser.add_argument("--no-routes", action="store_true")
    parser.add_argument("--no-browser", action="store_true")
    parser.add_argument("--data-dir", default=str(DEFAULT_DATA_DIR))
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    figures: dict[str, Any] = {}
    if not args.no_routes:
        root = Path(args.data_dir)
        root.mkdir(parents=True, exist_ok=True)
        postgres = EmbeddedPostgres(root / "pg", root / "postgres.log")
        postgres.start()
        try:
            url = postgres.create_database("console_graph")
            figures["routes"] = asyncio.run(time_routes(url, args.facts, args.repeat))
        finally:
            postgres.stop()
    if not args.no_browser:
        sizes = [int(s) for s in args.entities.split(",") if s]
        figures["layout"] = asyncio.run(time_layout(sizes))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
