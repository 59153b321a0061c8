"""Several server processes on one port (ENGRAM_API_PROCESSES, `engram serve --processes N`).

A recall is CPU work in one process (MaxSim, fusion, JSON), so one process uses about one
core. The parent binds the port once and hands the listening socket to N spawned children,
each with its own pool, model and caches (uvicorn's own multi-process mode does the same);
the kernel spreads connections over the processes accepting on it. The parent only
supervises: it forwards SIGTERM/SIGINT, and when a child dies it stops the others and exits
with the child's code, so `engram up` or the orchestrator restarts the whole server.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import shutil
import signal
import socket
import tempfile
from collections.abc import Callable
from multiprocessing.connection import wait
from types import FrameType

log = logging.getLogger("engram.server")
STOP_TIMEOUT_S = 20.0


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def serve_processes(
    count: int, host: str, port: int, child: Callable[[socket.socket], None]
) -> int:
    """Run `child(listening_socket)` in `count` processes until a signal or a child's exit."""
    sock = bind(host, port)
    # The children's counters and histograms go to files here, and each child's /metrics
    # sums them (server/app.py): Prometheus scrapes one port and must see every process.
    metrics_dir = tempfile.mkdtemp(prefix="engram-metrics-")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir
    context = multiprocessing.get_context("spawn")
    processes = [
        context.Process(target=child, args=(sock,), name=f"engram-server-{index}")
        for index in range(count)
    ]
    stopping: list[int] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stopping.append(signum)

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        for process in processes:
            process.start()
        log.info("serving on %s:%d with %d processes", host, port, count)
        code = 0
        while not stopping:
            ended = wait([p.sentinel for p in processes], timeout=0.5)
            if ended:
                dead = next(p for p in processes if p.sentinel in ended)
                code = dead.exitcode or 1
                log.error("%s exited with code %s; stopping the others", dead.name, code)
                break
        return code
    finally:
        for process in processes:
            if process.is_alive() and process.pid is not None:
                process.terminate()
        for process in processes:
            process.join(STOP_TIMEOUT_S)
            if process.is_alive():
                process.kill()
                process.join()
        sock.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        del os.environ["PROMETHEUS_MULTIPROC_DIR"]
        shutil.rmtree(metrics_dir, ignore_errors=True)
