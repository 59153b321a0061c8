"""`engram up` end to end: the real entry point, embedded PostgreSQL and Temporal, a worker
and the HTTP server as child processes."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from support.waiting import WAIT_S, until, until_sync
from temporalio.testing import WorkflowEnvironment

from engine.db import MIGRATION_LOCK_KEY
from engram.postgres import EmbeddedPostgres

pytestmark = pytest.mark.stack


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def engram_command() -> list[str]:
    script = Path(sys.executable).parent / "engram"
    return [str(script)] if script.exists() else [sys.executable, "-m", "engram.cli"]


@dataclass
class Ports:
    api: int
    temporal: int
    ui: int
    worker_metrics: int

    def env(self, home: Path) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            {
                "ENGRAM_HOME": str(home),
                "ENGRAM_API_PORT": str(self.api),
                "ENGRAM_TEMPORAL_PORT": str(self.temporal),
                "ENGRAM_TEMPORAL_UI_PORT": str(self.ui),
                "ENGRAM_WORKER_METRICS_PORT": str(self.worker_metrics),
            }
        )
        for name in (
            "ENGRAM_DATABASE_URL",
            "ENGRAM_TEMPORAL_ADDRESS",
            "ENGRAM_LLM_API_KEY",
            "OPENAI_API_KEY",
        ):
            env.pop(name, None)
        return env


def http(method: str, url: str, body: Any = None, timeout: float = 60) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        url, data=data, method=method, headers={"content-type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            raw = response.read().decode()
            status = response.status
    except urllib.error.HTTPError as exc:
        raw = exc.read().decode()
        status = exc.code
    try:
        return status, json.loads(raw)
    except json.JSONDecodeError:
        return status, raw


def wait_until_ready(process: subprocess.Popen[str], url: str) -> None:
    """Until /ready answers. No deadline of its own (a fixed 150 s one counted PostgreSQL's,
    Temporal's and the migrations' start besides the supervisor's own READY_TIMEOUT_S for the
    server and the worker): the supervisor exits by itself when a part misses its bound, and
    the per-test timeout bounds the rest."""
    while True:
        if process.poll() is not None:
            out = process.stdout.read() if process.stdout is not None else ""
            raise AssertionError(f"engram up exited with {process.returncode}: {out}")
        try:
            status, _ = http("GET", url, timeout=2)
            if status == 200:
                return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.5)


def stop(process: subprocess.Popen[str]) -> tuple[int, str]:
    """Ctrl-C as a terminal sends it: SIGINT to the whole foreground process group."""
    os.killpg(process.pid, signal.SIGINT)
    out, _ = process.communicate(timeout=90)
    return process.returncode, out


@pytest.fixture
def ports() -> Ports:
    return Ports(free_port(), free_port(), free_port(), free_port())


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "engram-home"


def start(ports: Ports, home: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*engram_command(), "up"],
        env=ports.env(home),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def test_engram_up_serves_retains_stops_cleanly_and_resumes(ports: Ports, home: Path) -> None:
    api = f"http://127.0.0.1:{ports.api}"
    process = start(ports, home)
    try:
        wait_until_ready(process, f"{api}/ready")
        status, body = http(
            "POST",
            f"{api}/v1/default/banks/e2e/memories",
            {
                "items": [
                    {
                        "content": "Nadia adopted a cat named Miso in Lisbon.",
                        "document_id": "n1",
                        "timestamp": "2024-06-01T10:00:00Z",
                    }
                ]
            },
        )
        assert status == 200, body
        assert body["facts_added"] >= 1
        status, metrics = http("GET", f"{api}/metrics")
        assert status == 200
        assert (
            'engram_http_requests_total{method="POST",route="/v1/default/banks/{bank_id}/memories",status="200"}'
            in metrics
        )
        assert "engram_db_pool_size" in metrics
        with urllib.request.urlopen(f"http://127.0.0.1:{ports.worker_metrics}/", timeout=10) as r:
            worker_metrics = r.read().decode()
        assert (
            'engram_activity_finished_total{activity="upsert_documents",outcome="ok"}'
            in worker_metrics
        )
        assert "temporal_" in worker_metrics  # the SDK's own series, re-exposed
        with urllib.request.urlopen(f"http://127.0.0.1:{ports.ui}/", timeout=10) as r:
            assert r.status == 200  # the Temporal Web UI
    finally:
        code, out = stop(process)
    assert code == 0, out
    assert "Traceback" not in out, out
    assert f"http://127.0.0.1:{ports.api}" in out
    assert f"http://127.0.0.1:{ports.ui}" in out
    assert str(home) in out

    process = start(ports, home)
    try:
        wait_until_ready(process, f"{api}/ready")
        status, body = http("GET", f"{api}/v1/default/banks/e2e/memories/list")
        assert status == 200
        assert any("Miso" in item["text"] for item in body["items"])
    finally:
        code, out = stop(process)
    assert code == 0, out


def test_engram_up_names_a_taken_port_and_fails(ports: Ports, home: Path) -> None:
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", ports.api))
        blocker.listen()
        result = subprocess.run(
            [*engram_command(), "up"],
            env=ports.env(home),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert result.returncode != 0
    assert f"port {ports.api} (API)" in result.stderr


# A process can exit between being listed and being read (the crash loop below kills them as
# they come): it then has no children and no command line.
def child_pids(pid: int) -> list[int]:
    try:
        raw = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except FileNotFoundError:
        return []
    return [int(p) for p in raw]


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except FileNotFoundError:
        return ""


def wait_for(condition: Callable[[], bool], what: str) -> None:
    until_sync(condition, bool, what, every=0.2)


def answers(url: str) -> bool:
    try:
        return http("GET", url, timeout=5)[0] == 200
    except (urllib.error.URLError, OSError):
        return False


def child_running(supervisor: int, module: str, other_than: int = -1) -> int | None:
    found = [p for p in child_pids(supervisor) if f"-m {module}" in cmdline(p)]
    return next((p for p in found if p != other_than), None)


def wait_supervising(process: subprocess.Popen[str]) -> None:
    """Until `engram up` has finished starting and watches its parts (it prints this last):
    /ready can answer before then, and a part killed earlier is a failure to start."""
    assert process.stdout is not None
    for line in process.stdout:
        if line.startswith("Press Ctrl-C"):
            return
    raise AssertionError(f"engram up exited with {process.wait()} while starting")


def respawned(process: subprocess.Popen[str], module: str, old: int) -> int | None:
    """The pid of the child that replaced `old`; None once the supervisor has exited."""
    deadline = time.monotonic() + WAIT_S
    while process.poll() is None:
        assert time.monotonic() < deadline, f"the {module} was not restarted"
        pid = child_running(process.pid, module, old)
        if pid is not None:
            return pid
        time.sleep(0.1)
    return None


def retain_one(api: str, text: str) -> None:
    body = {"items": [{"content": text, "timestamp": "2024-06-01T10:00:00Z"}]}
    status, answer = http("POST", f"{api}/v1/default/banks/heal/memories", body, timeout=120)
    assert status == 200, answer


def test_killed_parts_come_back_and_a_crash_loop_stops_the_stack(ports: Ports, home: Path) -> None:
    api = f"http://127.0.0.1:{ports.api}"
    process = start(ports, home)
    try:
        wait_until_ready(process, f"{api}/ready")
        wait_supervising(process)
        for module in ("worker", "server"):
            victim = child_running(process.pid, module)
            assert victim is not None
            os.kill(victim, signal.SIGKILL)
            if respawned(process, module, victim) is None:
                out = process.stdout.read() if process.stdout is not None else ""
                raise AssertionError(f"the {module} was not restarted: {out}")
            wait_for(lambda: answers(f"{api}/ready"), "/ready after a restart")
        retain_one(api, "Nadia adopted a cat named Miso after the worker was restarted.")

        postmaster = int((home / "postgres" / "postmaster.pid").read_text().split()[0])
        os.kill(postmaster, signal.SIGKILL)
        wait_for(lambda: not answers(f"{api}/ready") or _restarted(home, postmaster), "outage")
        wait_for(lambda: answers(f"{api}/ready"), "/ready after PostgreSQL came back")
        wait_for(lambda: answers(f"{api}/v1/default/banks/heal/memories/list"), "a read")
        retain_one(api, "Omar planted a lemon tree after PostgreSQL was restarted.")

        # Killed again and again, the worker is crash-looping: the stack stops, showing its log.
        pid = child_running(process.pid, "worker")
        while pid is not None:
            os.kill(pid, signal.SIGKILL)
            pid = respawned(process, "worker", pid)
        out, _ = process.communicate(timeout=90)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode != 0
    assert "engram: the worker exited unexpectedly with code -9; restarting it in" in out
    assert "engram: the HTTP server is running again" in out
    assert "engram: the PostgreSQL exited unexpectedly with code -9" in out
    assert "5th failure within 60 s; stopping" in out
    assert f"Last lines of {home / 'logs' / 'worker.log'}" in out
    for port in (ports.api, ports.temporal):
        with socket.socket() as sock:
            assert sock.connect_ex(("127.0.0.1", port)) != 0, f"port {port} still served"


def _restarted(home: Path, old_postmaster: int) -> bool:
    try:
        return int((home / "postgres" / "postmaster.pid").read_text().split()[0]) != old_postmaster
    except (OSError, ValueError, IndexError):
        return False


async def migration_waiting(dsn: str) -> bool:
    """Whether a session of the database waits for an advisory lock (the migration's)."""
    conn = await asyncpg.connect(dsn)
    try:
        return bool(
            await conn.fetchval(
                "SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database"
                " WHERE l.locktype = 'advisory' AND NOT l.granted"
                " AND d.datname = current_database()"
            )
        )
    finally:
        await conn.close()


async def test_external_mode_starts_nothing_embedded_and_migrates_before_the_ready_timer(
    ports: Ports, home: Path, postgres: EmbeddedPostgres, temporal_env: WorkflowEnvironment
) -> None:
    dsn = postgres.create_database("t_external_mode")
    env = ports.env(home)
    env["ENGRAM_DATABASE_URL"] = dsn
    env["ENGRAM_TEMPORAL_ADDRESS"] = temporal_env.client.service_client.config.target_host
    env["ENGRAM_TASK_QUEUE"] = "external-mode"
    # A migration as long as we like: it waits for the lock this session holds.
    holder = await asyncpg.connect(dsn)
    await holder.execute("SELECT pg_advisory_lock($1)", MIGRATION_LOCK_KEY)
    process = subprocess.Popen(
        [*engram_command(), "up"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:

        async def migrating() -> bool:
            assert process.poll() is None, "engram up exited before migrating"
            return await migration_waiting(dsn)

        await until(migrating, bool, "the migration waiting for the lock", every=0.2)
        # While it migrates, the server and the worker (whose start the timer counts) wait.
        running = [cmdline(pid) for pid in child_pids(process.pid)]
        assert [c for c in running if "engram.cli migrate" in c], running
        assert not [c for c in running if "-m server" in c or "-m worker" in c], running
        await holder.execute("SELECT pg_advisory_unlock($1)", MIGRATION_LOCK_KEY)
        await asyncio.to_thread(wait_until_ready, process, f"http://127.0.0.1:{ports.api}/ready")
        assert not (home / "postgres").exists()
        assert not (home / "temporal.db").exists()
    finally:
        await holder.close()
        code, out = await asyncio.to_thread(stop, process)
    assert code == 0, out
    assert "(external)" in out
    assert out.index("pending schema migration") < out.index("Engram is up"), out
    assert "applied 0001_initial.sql" in (home / "logs" / "migrate.log").read_text()


def retain_loop(api: str, client: int, stop: threading.Event, acked: list[str]) -> None:
    """Synchronous one-item retains, one document each, until `stop`; the ids answered 200."""
    n = 0
    while not stop.is_set():
        document = f"c{client}-{n}"
        n += 1
        body = {
            "items": [
                {"content": f"Visitor {document} signed the guest book.", "document_id": document}
            ]
        }
        try:
            status, _ = http("POST", f"{api}/v1/default/banks/fault/memories", body, timeout=120)
        except (urllib.error.URLError, OSError):
            time.sleep(0.2)
            continue
        if status == 200:
            acked.append(document)
        else:
            time.sleep(0.2)


def test_acknowledged_retains_survive_postgres_and_temporal_restarts_under_load(
    ports: Ports, home: Path
) -> None:
    api = f"http://127.0.0.1:{ports.api}"
    process = start(ports, home)
    try:
        wait_until_ready(process, f"{api}/ready")
        wait_supervising(process)
        assert http("PUT", f"{api}/v1/default/banks/fault", {})[0] == 200
        stop_event = threading.Event()
        acked: list[str] = []
        clients = [
            threading.Thread(target=retain_loop, args=(api, c, stop_event, acked)) for c in range(3)
        ]
        for thread in clients:
            thread.start()
        try:
            wait_for(lambda: len(acked) >= 3, "retains before the fault")
            postmaster = int((home / "postgres" / "postmaster.pid").read_text().split()[0])
            os.kill(postmaster, signal.SIGKILL)
            before = len(acked)
            wait_for(lambda: _restarted(home, postmaster), "PostgreSQL to be restarted")
            wait_for(lambda: len(acked) >= before + 3, "retains after PostgreSQL's restart")
            temporal = next(p for p in child_pids(process.pid) if "start-dev" in cmdline(p))
            os.kill(temporal, signal.SIGKILL)
            before = len(acked)
            wait_for(lambda: len(acked) >= before + 3, "retains after Temporal's restart")
        finally:
            stop_event.set()
            for thread in clients:
                thread.join(150)
        wait_for(lambda: answers(f"{api}/ready"), "/ready after the fault")
        status, listed = http("GET", f"{api}/v1/default/banks/fault/documents?limit=1000")
        assert status == 200, listed
        stored = [item["id"] for item in listed["items"]]
        assert set(acked) <= set(stored), sorted(set(acked) - set(stored))
        for document in acked:
            status, chunks = http(
                "GET", f"{api}/v1/default/banks/fault/documents/{document}/chunks"
            )
            assert status == 200, chunks
            assert len(chunks["items"]) == 1, (document, chunks)
    finally:
        code, out = stop(process)
    assert code == 0, out
    assert "engram: the PostgreSQL exited unexpectedly with code -9" in out
    assert "engram: the Temporal exited unexpectedly with code -9" in out
