"""ENGRAM_API_PROCESSES=N: N server processes answer on one port; one dying stops them all."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from support.serve import free_port
from temporalio.testing import WorkflowEnvironment

from engine.settings import Settings
from engram.supervisor import default_api_processes

START_TIMEOUT_S = 240.0
HEALTH_REQUESTS = 12


def requests_counted(exposition: str, route: str) -> float:
    return sum(
        sample.value
        for family in text_string_to_metric_families(exposition)
        for sample in family.samples
        if sample.name == "engram_http_requests_total" and sample.labels["route"] == route
    )


def server_process(
    settings: Settings, temporal_env: WorkflowEnvironment, port: int, home: Path
) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    env.update(
        {
            "ENGRAM_DATABASE_URL": settings.database_url,
            "ENGRAM_TEMPORAL_ADDRESS": temporal_env.client.service_client.config.target_host,
            "ENGRAM_API_PORT": str(port),
            "ENGRAM_API_PROCESSES": "2",
            "ENGRAM_HOME": str(home),
            "ENGRAM_RECALL_TOKEN_CACHE_MB": "16",
        }
    )
    return subprocess.Popen([sys.executable, "-m", "server"], env=env)


async def answering_pids(base: str, deadline: float) -> set[int]:
    """Pids seen on /health/live over fresh connections until both processes answered."""
    pids: set[int] = set()
    while time.monotonic() < deadline and len(pids) < 2:
        try:
            async with httpx.AsyncClient(base_url=base, timeout=5) as client:
                pids.add((await client.get("/health/live")).json()["pid"])
        except httpx.TransportError:
            await asyncio.sleep(0.5)
    return pids


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def children_of(pid: int) -> set[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return {int(child) for child in path.read_text().split()} if path.exists() else set()


async def test_two_processes_share_the_port_and_stop_together(
    settings: Settings, temporal_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    port = free_port()
    process = server_process(settings, temporal_env, port, tmp_path)
    try:
        base = f"http://127.0.0.1:{port}"
        pids = await answering_pids(base, time.monotonic() + START_TIMEOUT_S)
        assert len(pids) == 2, pids
        assert pids <= children_of(process.pid)
        async with httpx.AsyncClient(base_url=base, timeout=30) as client:
            response = await client.post(
                "/v1/default/banks/processes/memories/recall", json={"query": "anything"}
            )
        assert response.status_code in (200, 404), response.text
        # Whichever process a scrape lands on, it counts the requests of both.
        for _ in range(HEALTH_REQUESTS):
            async with httpx.AsyncClient(base_url=base, timeout=30) as client:
                assert (await client.get("/health")).status_code == 200
        for _ in range(4):
            async with httpx.AsyncClient(base_url=base, timeout=30) as client:
                scraped = (await client.get("/metrics")).text
            assert requests_counted(scraped, "/health") == HEALTH_REQUESTS
        # One child killed: the parent stops the other and exits, for its supervisor to
        # restart the server whole (a half-dead server would keep taking connections).
        os.kill(next(iter(pids)), signal.SIGKILL)
        code = await asyncio.to_thread(process.wait, 60)
        assert code != 0
        assert not any(alive(pid) for pid in pids)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


async def test_sigterm_stops_every_process_cleanly(
    settings: Settings, temporal_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    port = free_port()
    process = server_process(settings, temporal_env, port, tmp_path)
    try:
        pids = await answering_pids(f"http://127.0.0.1:{port}", time.monotonic() + START_TIMEOUT_S)
        assert len(pids) == 2, pids
        process.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(process.wait, 60) == 0
        assert not any(alive(pid) for pid in pids)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.mark.parametrize(("cores", "processes"), [(1, 1), (2, 1), (4, 2), (8, 4), (64, 4)])
def test_engram_up_uses_one_server_process_per_two_cores(cores: int, processes: int) -> None:
    assert default_api_processes(cores) == processes
