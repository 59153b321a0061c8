"""The disk nearly full (issue 18): PostgreSQL's data on a small tmpfs, filled. A retain then
answers a JSON 507 or 503 (not a 500, not a hang); acknowledged writes are there exactly once;
once space is freed the same stack accepts retains again."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from prometheus_client import CollectorRegistry
from support.waiting import until
from temporalio.testing import WorkflowEnvironment

from engine.db import create_pool, migrate
from engine.embedding import Embedder
from engine.settings import Settings
from engram.postgres import EmbeddedPostgres
from server.app import create_app
from server.services import Services
from worker.main import WorkerServices, build_worker
from worker.metrics import ActivityMetrics, MetricsInterceptor

BASE = "/v1/default/banks"
DISK_MB = 400


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={DISK_MB}m,mode=0777", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here ({done.stderr.strip()})")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(path: Path) -> None:
    """Write zeros until the disk refuses (ENOSPC). Unbuffered: a buffered file kept the
    part of a block the disk did not take and failed again when closed."""
    with path.open("wb", buffering=0) as out:
        block = b"\0" * (1 << 20)
        try:
            while True:
                out.write(block)
                out.flush()
        except OSError:
            pass


def item(n: int, repeat: int = 40) -> dict[str, str]:
    """A document of one chunk; large ones (staged as TOAST) must extend a file on disk."""
    text = f"Visitor {n} signed the guest book and wrote a long note. " * repeat
    return {"content": text, "document_id": f"d{n}"}


async def stored_documents(api: httpx.AsyncClient, bank: str) -> set[str]:
    listed = await api.get(f"{BASE}/{bank}/documents?limit=100")
    assert listed.status_code == 200, listed.text
    return {d["id"] for d in listed.json()["items"]}


async def chunk_texts(api: httpx.AsyncClient, bank: str, document: str) -> list[str]:
    response = await api.get(f"{BASE}/{bank}/documents/{document}/chunks")
    assert response.status_code == 200, response.text
    return [c["chunk_text"] for c in response.json()["items"]]


async def test_a_full_disk_is_a_clear_error_and_the_stack_heals_when_space_returns(
    small_disk: Path,
    tmp_path: Path,
    temporal_env: WorkflowEnvironment,
    embedder: Embedder,
    cpu: ThreadPoolExecutor,
    task_queue: str,
    bank_id: str,
) -> None:
    server = EmbeddedPostgres(small_disk / "data", tmp_path / "postgres.log")
    server.start()
    try:
        dsn = server.create_database("t_disk_full")
        await migrate(dsn, embedder.dimension, embedder.space)
        pool = await create_pool(dsn, max_size=5)
        settings = Settings(home=tmp_path, database_url=dsn, task_queue=task_queue)
        services = WorkerServices(pool, embedder, cpu, None)
        metrics = MetricsInterceptor(ActivityMetrics(CollectorRegistry()))
        app = create_app(lambda: None)  # type: ignore[arg-type,return-value]
        app.state.services = Services(settings, pool, temporal_env.client, embedder, cpu)
        transport = httpx.ASGITransport(app=app)
        try:
            async with (
                build_worker(temporal_env.client, task_queue, services, metrics),
                httpx.AsyncClient(transport=transport, base_url="http://engram.test") as api,
            ):
                acked: list[str] = []
                for n in range(3):
                    first = {"items": [item(n)]}
                    response = await api.post(f"{BASE}/{bank_id}/memories", json=first)
                    assert response.status_code == 200, response.text
                    acked.append(f"d{n}")
                filler = small_disk / "filler"
                await asyncio.to_thread(fill, filler)
                refused = 0
                for n in range(3, 8):
                    body: dict[str, object] = {"items": [item(n, 6_000)], "async": True}
                    response = await asyncio.wait_for(
                        api.post(f"{BASE}/{bank_id}/memories", json=body), 60
                    )
                    assert response.status_code in (200, 503, 507), response.text
                    assert response.headers["content-type"].startswith("application/json")
                    if response.status_code == 200:
                        acked.append(f"d{n}")
                    else:
                        refused += 1
                        assert "Retry-After" in response.headers
                        assert "Traceback" not in response.text
                assert refused > 0, "every write was accepted on a full disk"
                filler.unlink()
                healed = {"items": [item(100)]}
                await until(  # the stack heals: a retain goes through again
                    lambda: api.post(f"{BASE}/{bank_id}/memories", json=healed),
                    lambda response: response.status_code == 200,
                    "a retain accepted once the disk has room",
                    every=0.5,
                )
                await until(  # the async writes acknowledged while full finish too
                    lambda: stored_documents(api, bank_id),
                    lambda stored: set(acked) <= stored,
                    f"every acknowledged document ({sorted(acked)}) stored",
                    every=0.5,
                )
                for document in acked:  # exactly once: no chunk stored twice
                    texts = await chunk_texts(api, bank_id, document)
                    assert len(texts) == len(set(texts)) > 0, document
        finally:
            await pool.close()
    finally:
        server.stop()
