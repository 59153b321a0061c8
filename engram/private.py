"""Files and directories only Engram's user can read: data, logs, keys (docs/security.md)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import BinaryIO

# For the embedded servers: every file they create is owner-only.
OWNER_ONLY_UMASK = 0o077


def private_dir(path: Path) -> Path:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.chmod(0o700)
    return path


def open_private_log(path: Path) -> BinaryIO:
    """A log file only its owner can read (a server's error may quote memory content)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.fchmod(fd, 0o600)
    return os.fdopen(fd, "ab")
