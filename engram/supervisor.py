"""`engram up`: the whole stack under one supervisor.

Starts what is embedded (PostgreSQL, the Temporal dev server), then one worker and the HTTP
server as child processes; prints where everything is; stops everything on Ctrl-C. If a port
is taken or a child dies, it says which and exits non-zero.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from engine.errors import ConfigurationError
from engine.settings import Settings
from engram.postgres import EmbeddedPostgres, EmbeddedPostgresError
from engram.private import private_dir
from engram.temporal_server import TemporalDevServer, TemporalServerError, port_open
from workflows.converter import load_payload_key

READY_TIMEOUT_S = 120.0
POLL_S = 0.5
# One BLAS/OpenMP thread per child: each process already runs its CPU work on a sized thread
# pool, and OpenBLAS's own threads on top of it oversubscribe the cores. Measured on this
# 2-core machine (shared, load ~6) with recall's MaxSim product, (12 x 384) @ (384 x 4,000):
# 18.7-38.8 ms per product with OpenBLAS's default threads, 1.8-4.1 ms with one; from two
# threads at once 12.4-16.8 ms vs 1.4-3.0 ms. A value the operator set is kept.
SINGLE_THREADED = (
    "OPENBLAS_NUM_THREADS",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
)


def detach_from_terminal() -> None:
    """Run in the child before exec: its own process group, so Ctrl-C reaches only the
    supervisor, which stops the parts in order (server and worker before the databases);
    and a SIGTERM if the supervisor itself dies, so no part outlives it."""
    os.setpgrp()
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


PR_SET_PDEATHSIG = 1


class StackError(RuntimeError):
    """A one-line reason the stack cannot run."""


@dataclass
class Child:
    name: str
    process: subprocess.Popen[bytes]


def taken_ports(settings: Settings) -> list[str]:
    wanted = [("API", settings.api_port), ("worker metrics", settings.worker_metrics_port)]
    if settings.embedded_temporal:
        wanted += [
            ("Temporal", settings.temporal_port),
            ("Temporal UI", settings.temporal_ui_port),
        ]
    return [f"port {port} ({what})" for what, port in wanted if port_open("127.0.0.1", port)]


def default_api_processes(cores: int | None = None) -> int:
    """One server process per two cores, at most 4: the worker, PostgreSQL and Temporal need
    the rest (recall throughput by process count: docs/benchmarks.md)."""
    return max(1, min(4, (cores or os.cpu_count() or 1) // 2))


def child_env(settings: Settings, database_url: str) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("ENGRAM_API_PROCESSES", str(default_api_processes()))
    env["ENGRAM_DATABASE_URL"] = database_url
    env["ENGRAM_TEMPORAL_ADDRESS"] = settings.resolved_temporal_address
    env["ENGRAM_HOME"] = str(settings.home)
    env["PYTHONUNBUFFERED"] = "1"
    for name in SINGLE_THREADED:
        env.setdefault(name, "1")
    return env


def wait_ready(url: str, children: list[Child], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for child in children:
            code = child.process.poll()
            if code is not None:
                raise StackError(f"the {child.name} exited with code {code} while starting")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(POLL_S)
    raise StackError(f"{url} did not answer 200 within {timeout:.0f} s")


class Stack:
    def __init__(self, settings: Settings, out: Callable[[str], None]) -> None:
        self.settings = settings
        self.out = out
        self.postgres: EmbeddedPostgres | None = None
        self.temporal: TemporalDevServer | None = None
        self.children: list[Child] = []

    @property
    def logs(self) -> Path:
        return self.settings.home / "logs"

    def start(self) -> None:
        settings = self.settings
        private_dir(settings.home)
        private_dir(self.logs)
        # Made here, before the server and the worker race to make it.
        load_payload_key(settings)
        taken = taken_ports(settings)
        if taken:
            raise StackError(f"already in use: {', '.join(taken)}")
        database_url = settings.database_url
        if settings.embedded_postgres:
            self.postgres = EmbeddedPostgres(settings.home / "postgres", self.logs / "postgres.log")
            self.postgres.start()
            database_url = self.postgres.dsn
        if settings.embedded_temporal:
            self.temporal = TemporalDevServer(
                settings.home / "temporal.db",
                self.logs / "temporal.log",
                settings.temporal_port,
                settings.temporal_ui_port,
            )
            self.temporal.start()
        env = child_env(settings, database_url)
        for name, module in (("worker", "worker"), ("HTTP server", "server")):
            process = subprocess.Popen(
                [sys.executable, "-m", module],
                env=env,
                preexec_fn=detach_from_terminal,  # noqa: PLW1509 - no threads here
            )
            self.children.append(Child(name, process))
        api = f"http://{settings.api_host}:{settings.api_port}"
        wait_ready(f"{api}/ready", self.children, READY_TIMEOUT_S)
        self.out(f"Engram is up.\n  API          {api}")
        self.out(f"  Console      {api}/console/")
        if self.temporal is not None:
            self.out(f"  Temporal UI  http://127.0.0.1:{settings.temporal_ui_port}")
        else:
            self.out(f"  Temporal     {settings.resolved_temporal_address} (external)")
        self.out(f"  Metrics      {api}/metrics, http://127.0.0.1:{settings.worker_metrics_port}/")
        if self.postgres is not None:
            self.out(f"  Data         {settings.home}")
        else:
            self.out(f"  Data         external PostgreSQL; logs in {self.logs}")
        self.out("Press Ctrl-C to stop.")

    def watch(self, stopping: Callable[[], bool]) -> None:
        """Return when asked to stop; raise when a child or an embedded service dies."""
        while not stopping():
            for child in self.children:
                code = child.process.poll()
                if code is not None:
                    raise StackError(f"the {child.name} exited unexpectedly with code {code}")
            for name, service in (("PostgreSQL", self.postgres), ("Temporal", self.temporal)):
                process = service.process if service is not None else None
                if process is not None and process.poll() is not None:
                    raise StackError(f"{name} exited unexpectedly with code {process.returncode}")
            time.sleep(POLL_S)

    def stop(self) -> None:
        for child in reversed(self.children):
            if child.process.poll() is None:
                child.process.send_signal(signal.SIGTERM)
        for child in reversed(self.children):
            try:
                child.process.wait(20)
            except subprocess.TimeoutExpired:
                child.process.kill()
                child.process.wait()
        if self.temporal is not None:
            self.temporal.stop()
        if self.postgres is not None:
            self.postgres.stop()


def run_stack(settings: Settings, out: Callable[[str], None] = print) -> int:
    requested: list[int] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        requested.append(signum)

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    stack = Stack(settings, out)
    try:
        stack.start()
        stack.watch(lambda: bool(requested))
        out("Stopping Engram...")
        return 0
    except (StackError, EmbeddedPostgresError, TemporalServerError, ConfigurationError) as exc:
        print(f"engram: {exc}", file=sys.stderr)
        return 1
    finally:
        stack.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
