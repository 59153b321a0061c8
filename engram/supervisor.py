"""`engram up`: the whole stack under one supervisor.

Starts what is embedded (PostgreSQL, the Temporal dev server), applies pending schema
migrations (`engram migrate` as a child, for as long as they take: an upgrade of a large
database can run for minutes), then one worker and the HTTP server as child processes, and
gives them READY_TIMEOUT_S to answer; prints where everything is; stops everything on Ctrl-C.
If a port is taken or a part fails while starting, it says which and exits non-zero.

Once up, a part that dies (worker, HTTP server, Temporal, PostgreSQL) is restarted after a
backoff (0.5 s, doubling, at most 10 s) with a line on stderr; the others ride it out (the
server's pool and the Temporal clients reconnect). A part that crashes MAX_CRASHES times
within CRASH_WINDOW_S is not going to get better by itself: the stack stops, printing the last
lines of that part's log. Each part logs to `$ENGRAM_HOME/logs/<part>.log`.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from types import FrameType

import asyncpg

from engine.db import pending_migrations
from engine.errors import ConfigurationError
from engine.settings import Settings
from engram.postgres import EmbeddedPostgres, EmbeddedPostgresError
from engram.private import open_private_log, private_dir
from engram.processes import wait_or_kill
from engram.temporal_server import TemporalDevServer, TemporalServerError, port_open
from workflows.converter import load_payload_key

READY_TIMEOUT_S = 120.0
POLL_S = 0.5
# A part restarted this often within the window is crash-looping (a bad configuration, a full
# disk): restarting it again would only hide that, so the stack stops and shows its log.
MAX_CRASHES = 5
CRASH_WINDOW_S = 60.0
BACKOFF_FIRST_S = 0.5
BACKOFF_MAX_S = 10.0
LOG_TAIL_LINES = 20
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

    def exit_code(self) -> int | None:
        return self.process.poll()


@dataclass
class Restarts:
    """When a part crashed lately: whether it may be restarted, and after how long."""

    times: deque[float] = field(default_factory=deque)

    def record(self, now: float) -> float | None:
        """The delay before restarting after a crash at `now`; None: crashing too often."""
        self.times.append(now)
        while self.times[0] <= now - CRASH_WINDOW_S:
            self.times.popleft()
        if len(self.times) >= MAX_CRASHES:
            return None
        return float(min(BACKOFF_FIRST_S * 2 ** (len(self.times) - 1), BACKOFF_MAX_S))


@dataclass
class Part:
    """One supervised process: how to see it died, how to start it again, where it logs."""

    name: str
    log: Path
    exit_code: Callable[[], int | None]
    restart: Callable[[], None]
    restarts: Restarts = field(default_factory=Restarts)
    due: float | None = None  # when its pending restart runs


def tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "  (no log)"
    return "\n".join(f"  {line}" for line in text.rstrip().splitlines()[-lines:])


# The Python children: (name, module run with `python -m`, which also names its log).
CHILDREN = (("worker", "worker"), ("HTTP server", "server"))


def module_of(name: str) -> str:
    return dict(CHILDREN)[name]


def _exit_code(service: EmbeddedPostgres | TemporalDevServer) -> Callable[[], int | None]:
    def code() -> int | None:
        process = service.process
        return process.poll() if process is not None else None

    return code


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


async def pending_schema(database_url: str) -> list[str]:
    """The migrations the database lacks (all of them for an empty one)."""
    conn = await asyncpg.connect(database_url)
    try:
        return await pending_migrations(conn)
    finally:
        await conn.close()


def wait_ready(url: str, children: list[Child], logs: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for child in children:
            code = child.process.poll()
            if code is not None:
                raise StackError(
                    f"the {child.name} exited with code {code} while starting; "
                    f"see {logs / (module_of(child.name) + '.log')}"
                )
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(POLL_S)
    raise StackError(f"{url} did not answer 200 within {timeout:.0f} s")


class Stack:
    def __init__(
        self,
        settings: Settings,
        out: Callable[[str], None],
        err: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True),
        stopping: Callable[[], bool] = lambda: False,
    ) -> None:
        self.settings = settings
        self.out = out
        self.err = err
        self.stopping = stopping
        self.postgres: EmbeddedPostgres | None = None
        self.temporal: TemporalDevServer | None = None
        self.migration: subprocess.Popen[bytes] | None = None
        self.children: list[Child] = []
        self.env: dict[str, str] = {}

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
        self.env = child_env(settings, database_url)
        self._migrate(database_url)
        for name, _ in CHILDREN:
            self.children.append(Child(name, self._spawn(name)))
        api = f"http://{settings.api_host}:{settings.api_port}"
        wait_ready(f"{api}/ready", self.children, self.logs, READY_TIMEOUT_S)
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
            self.out("  Data         external PostgreSQL")
        self.out(f"  Logs         {self.logs}")
        self.out("Press Ctrl-C to stop.")

    def _migrate(self, database_url: str) -> None:
        """Apply pending migrations before the server and worker start, so the readiness
        timer counts their start only (they would migrate too, under the timer)."""
        pending = asyncio.run(pending_schema(database_url))
        if not pending:
            return
        log_path = self.logs / "migrate.log"
        self.out(
            f"Applying {len(pending)} pending schema migration(s) before starting"
            f" ({pending[0]} ... {pending[-1]}); on a large database this can take a while."
            f" Log: {log_path}"
        )
        with open_private_log(log_path) as log:
            self.migration = subprocess.Popen(
                [sys.executable, "-m", "engram.cli", "migrate"],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=detach_from_terminal,  # noqa: PLW1509 - no threads here
            )
        while (code := self.migration.poll()) is None:
            if self.stopping():
                raise StackError("stopped while migrating (the migration rolls back)")
            time.sleep(POLL_S)
        self.migration = None
        if code != 0:
            raise StackError(
                f"the schema migration failed with code {code}; last lines of {log_path}:\n"
                f"{tail(log_path)}"
            )

    def _spawn(self, name: str) -> subprocess.Popen[bytes]:
        module = dict(CHILDREN)[name]
        with open_private_log(self._log_of(name)) as log:
            return subprocess.Popen(
                [sys.executable, "-m", module],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=detach_from_terminal,  # noqa: PLW1509 - no threads here
            )

    def _log_of(self, name: str) -> Path:
        return self.logs / f"{module_of(name)}.log"

    def _respawn(self, child: Child) -> None:
        child.process = self._spawn(child.name)

    def parts(self) -> list[Part]:
        """What `watch` supervises, databases first (their restart is what the others wait
        on)."""
        parts: list[Part] = []
        postgres, temporal = self.postgres, self.temporal
        if postgres is not None:
            log = postgres.log_path
            parts.append(Part("PostgreSQL", log, _exit_code(postgres), postgres.start))
        if temporal is not None:
            log = temporal.log_path
            parts.append(Part("Temporal", log, _exit_code(temporal), temporal.start))
        for child in self.children:
            log = self._log_of(child.name)
            parts.append(Part(child.name, log, child.exit_code, partial(self._respawn, child)))
        return parts

    def watch(self, stopping: Callable[[], bool]) -> None:
        """Return when asked to stop; restart a part that dies; raise when one keeps dying."""
        parts = self.parts()
        while not stopping():
            for part in parts:
                if part.due is None:
                    code = part.exit_code()
                    if code is not None:
                        self._crashed(part, f"exited unexpectedly with code {code}")
                elif time.monotonic() >= part.due:
                    part.due = None
                    try:
                        part.restart()
                    except (EmbeddedPostgresError, TemporalServerError, OSError) as exc:
                        self._crashed(part, f"could not be restarted: {exc}")
                    else:
                        self.err(f"engram: the {part.name} is running again")
            time.sleep(POLL_S)

    def _crashed(self, part: Part, why: str) -> None:
        delay = part.restarts.record(time.monotonic())
        if delay is None:
            raise StackError(
                f"the {part.name} {why}, its {MAX_CRASHES}th failure within "
                f"{CRASH_WINDOW_S:.0f} s; stopping. Last lines of {part.log}:\n{tail(part.log)}"
            )
        self.err(f"engram: the {part.name} {why}; restarting it in {delay:g} s")
        part.due = time.monotonic() + delay

    def stop(self) -> None:
        if self.migration is not None and self.migration.poll() is None:
            self.migration.send_signal(signal.SIGTERM)
            wait_or_kill(self.migration, 20)
        for child in reversed(self.children):
            if child.process.poll() is None:
                child.process.send_signal(signal.SIGTERM)
        for child in reversed(self.children):
            wait_or_kill(child.process, 20)
        if self.temporal is not None:
            self.temporal.stop()
        if self.postgres is not None:
            self.postgres.stop()


def run_stack(settings: Settings, out: Callable[[str], None] = print) -> int:
    requested: list[int] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        requested.append(signum)

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    stack = Stack(settings, out, stopping=lambda: bool(requested))
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
