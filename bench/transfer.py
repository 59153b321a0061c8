"""Transfer throughput: export a filled bank, download its archive, restore it as a new bank
and clone it, against a running Engram (`--url`), through the public API only.

    .venv/bin/python -m bench.transfer [--url URL] [--bank B] [--fill] [--data PATH]

`--fill` first (re)creates bank B and imports the LoCoMo conversations into it
(`POST .../import`, local extractor, observations off) and waits for the import. It prints,
for each step, wall time and rows per second (rows: every row the archive carries), the
archive's size, and whether the restored bank and the clone hold as many facts, documents and
links as the source.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

API = "/v1/default/banks"
DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo10.json"


async def wait(client: httpx.AsyncClient, bank: str, operation_id: str) -> dict[str, Any]:
    while True:
        body: dict[str, Any] = (await client.get(f"{API}/{bank}/operations/{operation_id}")).json()
        if body["status"] in ("completed", "failed", "cancelled"):
            if body["status"] != "completed":
                raise RuntimeError(f"operation {operation_id}: {body}")
            return body
        await asyncio.sleep(0.2)


async def fill(client: httpx.AsyncClient, bank: str, name: str, text: str) -> float:
    await client.delete(f"{API}/{bank}")
    settings = {"extraction_mode": "local", "enable_observations": False}
    (await client.put(f"{API}/{bank}", json=settings)).raise_for_status()
    started = time.perf_counter()
    body = {"content": text, "name": name, "format": "locomo"}
    answer = await client.post(f"{API}/{bank}/import", json=body)
    answer.raise_for_status()
    await wait(client, bank, answer.json()["operation_id"])
    return time.perf_counter() - started


async def shape(client: httpx.AsyncClient, bank: str) -> dict[str, Any]:
    stats = (await client.get(f"{API}/{bank}/stats")).json()
    return {k: stats.get(k) for k in ("total_nodes", "total_links", "total_documents")}


async def run(url: str, bank: str, data: tuple[str, str] | None) -> dict[str, Any]:
    report: dict[str, Any] = {}
    async with httpx.AsyncClient(base_url=url, timeout=600) as client:
        if data is not None:
            report["fill_s"] = round(await fill(client, bank, *data), 1)
        source = await shape(client, bank)
        report["source"] = source

        started = time.perf_counter()
        submitted = (await client.post(f"{API}/{bank}/transfer/export")).json()
        meta = (await wait(client, bank, submitted["operation_id"]))["result_metadata"]
        report["export_s"] = round(time.perf_counter() - started, 2)
        rows = sum(meta["exported"].values())
        report["archive_rows"] = rows
        report["archive_mb"] = round(meta["byte_size"] / 1e6, 2)

        started = time.perf_counter()
        archive = (await client.get(meta["download_url"])).content
        report["download_s"] = round(time.perf_counter() - started, 2)

        restored = f"{bank}-restored-{uuid.uuid4().hex[:6]}"
        started = time.perf_counter()
        files = {"file": ("bank.zip", archive, "application/zip")}
        imported = (await client.post(f"{API}/{restored}/transfer/import", files=files)).json()
        await wait(client, restored, imported["operation_id"])
        report["restore_s"] = round(time.perf_counter() - started, 2)
        report["restored_matches"] = await shape(client, restored) == source

        cloned = f"{bank}-clone-{uuid.uuid4().hex[:6]}"
        started = time.perf_counter()
        clone = await client.post(f"{API}/{bank}/clone", params={"target_bank_id": cloned})
        await wait(client, bank, clone.json()["operation_id"])
        report["clone_s"] = round(time.perf_counter() - started, 2)
        report["clone_matches"] = await shape(client, cloned) == source
        for step in ("export", "restore", "clone"):
            report[f"{step}_rows_per_s"] = round(rows / report[f"{step}_s"])
        for extra in (restored, cloned):
            await client.delete(f"{API}/{extra}")
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--url", default="http://127.0.0.1:8888")
    parser.add_argument("--bank", default="bench-transfer")
    parser.add_argument("--fill", action="store_true", help="import LoCoMo into the bank first")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args()
    data = (args.data.name, args.data.read_text()) if args.fill else None
    report = asyncio.run(run(args.url, args.bank, data))
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
