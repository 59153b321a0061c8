"""What authentication and the audit add to a request: argon2id verification of a new token,
a verified token's check (one primary-key read), and one audit insert. Prints medians and
p95 over `--requests` repetitions on an embedded PostgreSQL in a temporary directory."""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from engine.auth.audit import AuditEntry, record_audit
from engine.auth.keys import KeyVerifier, create_key, key_hasher
from engine.db import create_pool, migrate
from engine.embedding import load_embedder
from engram.postgres import EmbeddedPostgres


def _summary(name: str, seconds: list[float]) -> None:
    ms = sorted(s * 1000 for s in seconds)
    p95 = ms[int(len(ms) * 0.95) - 1]
    print(f"{name:<34} median {statistics.median(ms):7.3f} ms   p95 {p95:7.3f} ms  (n={len(ms)})")


async def measure(dsn: str, requests: int) -> None:
    embedder = load_embedder("minilm")
    await migrate(dsn, embedder.dimension, embedder.space)
    pool = await create_pool(dsn, max_size=2)
    try:
        async with pool.acquire() as conn:
            tokens = [
                (await create_key(conn, key_hasher(), bank_id="b", scope="write"))[1]
                for _ in range(min(requests, 20))
            ]
            cold: list[float] = []
            for token in tokens:  # a fresh verifier per token: nothing cached
                verifier = KeyVerifier()
                start = time.perf_counter()
                assert await verifier.principal(conn, token) is not None
                cold.append(time.perf_counter() - start)
            verifier = KeyVerifier()
            await verifier.principal(conn, tokens[0])
            warm: list[float] = []
            for _ in range(requests):
                start = time.perf_counter()
                assert await verifier.principal(conn, tokens[0]) is not None
                warm.append(time.perf_counter() - start)
            audit: list[float] = []
            for _ in range(requests):
                now = datetime.now(UTC)
                entry = AuditEntry("POST /v1/x", "http", "b", "k", "success", now, now, 200)
                start = time.perf_counter()
                await record_audit(conn, entry)
                audit.append(time.perf_counter() - start)
    finally:
        await pool.close()
    _summary("new token (argon2id verify + read)", cold)
    _summary("verified token (primary-key read)", warm)
    _summary("audit insert", audit)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=500)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="engram-auth-") as home:
        postgres = EmbeddedPostgres(Path(home) / "postgres", Path(home) / "postgres.log")
        postgres.start()
        try:
            asyncio.run(measure(postgres.dsn, args.requests))
        finally:
            postgres.stop()


if __name__ == "__main__":
    main()
