"""Every process finds an embedded PostgreSQL's socket: `engram keys` and `engram backup`
work out the same directory as the `engram up` that started it, however long its home."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from engram.postgres import EmbeddedPostgres

PRINT_SOCKET_DIR = (
    "import sys; from pathlib import Path; from engram.postgres import EmbeddedPostgres;"
    " d = Path(sys.argv[1]); print(EmbeddedPostgres(d, d / 'log').socket_dir)"
)


def _socket_dir(data_dir: Path, seed: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", PRINT_SOCKET_DIR, str(data_dir)],
        env={**os.environ, "PYTHONHASHSEED": seed},
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def test_a_long_home_gets_the_same_socket_directory_in_every_process(tmp_path: Path) -> None:
    data_dir = tmp_path / ("h" * 100) / "postgres"  # too long for a socket path beside it
    first, second = _socket_dir(data_dir, "1"), _socket_dir(data_dir, "2")
    assert first == second
    assert not first.startswith(str(tmp_path)) and len(first) + len("/.s.PGSQL.5432") <= 107
    assert EmbeddedPostgres(data_dir, tmp_path / "log").socket_dir == Path(first)
