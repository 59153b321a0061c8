"""The child processes `engram up` and the tests run: starting an embedded server, and
stopping a process that was asked to end."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

from engram.private import OWNER_ONLY_UMASK, open_private_log


def spawn_embedded(
    args: Sequence[str], log_path: Path, *, user: str | None = None
) -> subprocess.Popen[bytes]:
    """An embedded server (PostgreSQL, Temporal): output to its private log, every file it
    creates owner-only, and in its own process group, so Ctrl-C goes to the supervisor, which
    stops the servers in order."""
    log = open_private_log(log_path)
    try:
        return subprocess.Popen(
            args,
            user=user,
            umask=OWNER_ONLY_UMASK,
            stdout=log,
            stderr=log,
            stdin=subprocess.DEVNULL,
            process_group=0,
        )
    finally:
        log.close()


def wait_or_kill(process: subprocess.Popen[bytes], timeout: float) -> None:
    """Wait for a process that was asked to stop; kill it when it takes longer."""
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
