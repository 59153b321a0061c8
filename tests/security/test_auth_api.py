"""ENGRAM_AUTH=keys on the real app: 401 without a key, 403 for a read key's write, 404 for
another bank's key (on HTTP, the MCP prefix and the console API), rows of routes without a
bank scoped to the key, the audit trail of writes, and the request limits."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from argon2 import PasswordHasher
from hindsight_client import Hindsight
from hindsight_client_api.api.audit_api import AuditApi
from hindsight_client_api.api_client import ApiClient
from hindsight_client_api.configuration import Configuration
from starlette.applications import Starlette
from support.openapi import check
from support.operations import finished
from support.serve import serve
from temporalio.worker import Worker

from engine.auth.keys import create_key, revoke_key
from engine.db import Pool
from engine.settings import LLMSettings, SecuritySettings, Settings

BASE = "/v1/default/banks"
# Cheap hashing parameters: the tests check the flow, not argon2's cost.
HASHER = PasswordHasher(time_cost=1, memory_cost=8, parallelism=1)
RATE = 30
MAX_BODY = 200_000


@pytest.fixture
def settings(
    tmp_path: Path, database_url: str, task_queue: str, llm_settings: LLMSettings
) -> Settings:
    security = SecuritySettings(auth="keys", rate_limit_per_minute=RATE, max_body_bytes=MAX_BODY)
    return Settings(
        home=tmp_path,
        database_url=database_url,
        task_queue=task_queue,
        llm=llm_settings,
        security=security,
    )


async def _key(pool: Pool, bank_id: str | None, scope: str, **kwargs: object) -> str:
    async with pool.acquire() as conn:
        _, token = await create_key(conn, HASHER, bank_id=bank_id, scope=scope, **kwargs)  # type: ignore[arg-type]
    return token


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
async def admin(pool: Pool) -> str:
    return await _key(pool, None, "admin")


@pytest.fixture
async def seeded(api: httpx.AsyncClient, admin: str, bank_id: str) -> str:
    """`bank_id` with one retained document, made with the admin key."""
    put = await api.put(f"{BASE}/{bank_id}", json={"name": "a"}, headers=_auth(admin))
    assert put.status_code == 200, put.text
    retained = await api.post(
        f"{BASE}/{bank_id}/memories",
        json={"items": [{"content": "Anna adopted a dog named Rex.", "document_id": "d1"}]},
        headers=_auth(admin),
    )
    assert retained.status_code == 200, retained.text
    return bank_id


async def test_no_key_is_401_and_health_stays_public(api: httpx.AsyncClient) -> None:
    response = await api.get(f"{BASE}")
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    public = await api.get("/openapi.json")
    if public.status_code == 200:
        check(public.json(), response)
    assert "API key" in response.json()["detail"]
    bad = await api.get(f"{BASE}", headers=_auth("engram_0123456789ab_not-the-secret"))
    assert bad.status_code == 401
    assert (await api.get("/health")).status_code == 200
    assert (await api.get("/version")).status_code == 200


async def test_read_key_cannot_write_and_other_bank_is_not_found(
    api: httpx.AsyncClient, pool: Pool, seeded: str
) -> None:
    reader = await _key(pool, seeded, "read")
    listed = await api.get(f"{BASE}/{seeded}/memories/list", headers=_auth(reader))
    assert listed.status_code == 200 and listed.json()["total"] >= 1
    recall = await api.post(
        f"{BASE}/{seeded}/memories/recall", json={"query": "dog"}, headers=_auth(reader)
    )
    assert recall.status_code == 200, recall.text
    write = await api.post(
        f"{BASE}/{seeded}/memories", json={"items": [{"content": "x"}]}, headers=_auth(reader)
    )
    assert write.status_code == 403 and "read" in write.json()["detail"]
    check((await api.get("/openapi.json", headers=_auth(reader))).json(), write)

    other = await _key(pool, "someone-else", "admin")
    hidden = await api.get(f"{BASE}/{seeded}/profile", headers=_auth(other))
    missing = await api.get(f"{BASE}/no-such-bank/profile", headers=_auth(reader))
    assert hidden.status_code == missing.status_code == 404
    assert hidden.json()["detail"] == f"bank not found: {seeded}"
    deleted = await api.delete(f"{BASE}/{seeded}", headers=_auth(other))
    assert deleted.status_code == 404
    banks = await api.get(BASE, headers=_auth(other))
    assert seeded not in [b["bank_id"] for b in banks.json()["banks"]]


async def test_bank_management_needs_admin(api: httpx.AsyncClient, pool: Pool, seeded: str) -> None:
    writer = await _key(pool, seeded, "write")
    assert (await api.delete(f"{BASE}/{seeded}", headers=_auth(writer))).status_code == 403
    patch = await api.patch(f"{BASE}/{seeded}/config", json={"updates": {}}, headers=_auth(writer))
    assert patch.status_code == 403
    audit = await api.get(f"{BASE}/{seeded}/audit-logs", headers=_auth(writer))
    assert audit.status_code == 403


async def test_chunks_and_imports_are_scoped_by_their_rows(
    api: httpx.AsyncClient, pool: Pool, admin: str, seeded: str
) -> None:
    chunks = await api.get(f"{BASE}/{seeded}/documents/d1/chunks", headers=_auth(admin))
    chunk_id = chunks.json()["items"][0]["chunk_id"]
    own = await _key(pool, seeded, "read")
    other = await _key(pool, "bank-elsewhere", "write")
    assert (await api.get(f"/v1/default/chunks/{chunk_id}", headers=_auth(own))).status_code == 200
    leaked = await api.get(f"/v1/default/chunks/{chunk_id}", headers=_auth(other))
    assert leaked.status_code == 404
    assert "Rex" not in leaked.text

    started = await api.post(
        f"{BASE}/{seeded}/import",
        json={"content": '{"role": "user", "content": "I like tea."}\n', "format": "jsonl"},
        headers=_auth(admin),
    )
    assert started.status_code == 202, started.text
    status = f"/v1/default/imports/{started.json()['operation_id']}"
    assert (await api.get(status, headers=_auth(own))).status_code == 200
    assert (await api.get(status, headers=_auth(other))).status_code == 404


async def test_downloads_are_scoped_to_their_file_bank(
    api: httpx.AsyncClient, pool: Pool, admin: str, seeded: str
) -> None:
    export = await api.post(f"{BASE}/{seeded}/transfer/export", headers=_auth(admin))
    assert export.status_code == 202, export.text
    operation = f"{BASE}/{seeded}/operations/{export.json()['operation_id']}"
    body = await finished(api, operation, headers=_auth(admin))
    url = body["result_metadata"]["download_url"]
    own = await _key(pool, seeded, "read")
    other = await _key(pool, "bank-elsewhere", "admin")
    assert (await api.get(url)).status_code == 401
    downloaded = await api.get(url, headers=_auth(own))
    assert downloaded.status_code == 200
    assert downloaded.headers["content-type"] == "application/zip"
    leaked = await api.get(url, headers=_auth(other))
    assert leaked.status_code == 404 and seeded not in leaked.text
    # Creating a bank (a clone, a restore) is bank management: admin only.
    writer = await _key(pool, seeded, "write")
    clone = await api.post(
        f"{BASE}/{seeded}/clone", params={"target_bank_id": "x"}, headers=_auth(writer)
    )
    assert clone.status_code == 403


async def test_mcp_and_console_prefixes_are_guarded(
    api: httpx.AsyncClient, pool: Pool, seeded: str
) -> None:
    other = await _key(pool, "bank-elsewhere", "write")
    assert (await api.post(f"/mcp/{seeded}/", json={})).status_code == 401
    assert (await api.post(f"/mcp/{seeded}/", json={}, headers=_auth(other))).status_code == 404
    assert (await api.post("/mcp/", json={})).status_code == 401
    assert (await api.get("/console/api/banks")).status_code == 401
    # Pages and their modules are public, never a 401; what they fetch from /v1 is not.
    assert (await api.get("/console/index.html")).status_code == 200
    assert (await api.get("/console/app.js")).status_code == 200
    assert (await api.get("/v1/default/banks")).status_code == 401


async def test_revoked_and_expired_keys_stop_at_once(
    api: httpx.AsyncClient, pool: Pool, seeded: str
) -> None:
    async with pool.acquire() as conn:
        key, token = await create_key(conn, HASHER, bank_id=seeded, scope="read")
    assert (await api.get(f"{BASE}/{seeded}/profile", headers=_auth(token))).status_code == 200
    async with pool.acquire() as conn:
        await revoke_key(conn, key.id)
    assert (await api.get(f"{BASE}/{seeded}/profile", headers=_auth(token))).status_code == 401
    soon = datetime.now(UTC) + timedelta(seconds=1)
    expiring = await _key(pool, seeded, "read", expires_at=soon)
    async with pool.acquire() as conn:
        await conn.execute("UPDATE api_keys SET expires_at = now() - interval '1 s'")
    assert (await api.get(f"{BASE}/{seeded}/profile", headers=_auth(expiring))).status_code == 401


async def test_writes_are_audited_with_their_key(
    api: httpx.AsyncClient, app: Starlette, pool: Pool, admin: str, seeded: str
) -> None:
    writer = await _key(pool, seeded, "write")
    async with pool.acquire() as conn:
        writer_id = writer.split("_")[1]
        assert await conn.fetchval("SELECT count(*) FROM api_keys WHERE id = $1", writer_id) == 1
    retained = await api.post(
        f"{BASE}/{seeded}/memories",
        json={"items": [{"content": "Rex likes the beach."}], "async": True},
        headers=_auth(writer),
    )
    assert retained.status_code == 200, retained.text
    operation = retained.json()["operation_id"]
    reader = await _key(pool, seeded, "read")
    denied = await api.delete(f"{BASE}/{seeded}/memories", headers=_auth(reader))
    assert denied.status_code == 403

    async with serve(app) as url:
        config = Configuration(host=url, access_token=admin)
        async with ApiClient(config) as client:
            client.set_default_header("Authorization", f"Bearer {admin}")
            page = await AuditApi(client).list_audit_logs(seeded, limit=10)
    assert page.bank_id == seeded and page.total >= 3
    by_key = {(e.metadata["key_id"], e.metadata["outcome"]): e for e in page.items}
    write = by_key[(writer_id, "success")]
    assert write.action == "POST /v1/default/banks/{bank_id}/memories"
    assert write.metadata["operation_id"] == operation and write.metadata["status"] == 200
    assert write.transport == "http" and write.duration_ms is not None
    raw = await api.get(f"{BASE}/{seeded}/audit-logs", headers=_auth(admin))
    full = next(e for e in raw.json()["items"] if e["id"] == write.id)
    assert full["response"] == {"status": 200, "operation_id": operation}
    assert full["request"]["path"] == f"{BASE}/{seeded}/memories"
    stats = await api.get(f"{BASE}/{seeded}/audit-logs/stats?period=1d", headers=_auth(admin))
    assert stats.json()["trunc"] == "hour"
    retains = sum(
        b["actions"].get("POST /v1/default/banks/{bank_id}/memories", 0)
        for b in stats.json()["buckets"]
    )
    assert retains == 2  # the seed and the write (the denied one was a DELETE)
    assert (reader.split("_")[1], "denied") in by_key
    assert "Rex" not in str([e.to_dict() for e in page.items])  # no content in the trail


async def test_hindsight_client_api_key(
    app: Starlette, worker: Worker, pool: Pool, bank_id: str, admin: str
) -> None:
    async with serve(app) as url:
        keyed = Hindsight(base_url=url, api_key=admin)
        anonymous = Hindsight(base_url=url)
        try:
            await keyed.acreate_bank(bank_id, name="Keyed")
            retained = await keyed.aretain(bank_id, "Mira plays the cello.")
            assert retained.success
            with pytest.raises(Exception, match="401"):
                await anonymous.aretain(bank_id, "Nobody may write this.")
        finally:
            await keyed.aclose()  # type: ignore[no-untyped-call]
            await anonymous.aclose()  # type: ignore[no-untyped-call]


async def test_content_type_body_size_and_rate_limits(
    api: httpx.AsyncClient, pool: Pool, seeded: str
) -> None:
    writer = await _key(pool, seeded, "write", rate_limit_per_minute=5)
    url = f"{BASE}/{seeded}/memories"
    text = await api.post(
        url,
        content=b'{"items": [{"content": "from a web page"}]}',
        headers={**_auth(writer), "content-type": "text/plain"},
    )
    assert text.status_code == 415 and text.json()["field"] == "content-type"
    big = await api.post(url, json={"items": [{"content": "x" * MAX_BODY}]}, headers=_auth(writer))
    assert big.status_code == 413 and str(MAX_BODY) in big.json()["detail"]

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: counted as it arrives
        yield b'{"items": [{"content": "'
        for _ in range(MAX_BODY // 10_000 + 1):
            yield b"x" * 10_000
        yield b'"}]}'

    streamed = await api.post(
        url, content=chunks(), headers={**_auth(writer), "content-type": "application/json"}
    )
    assert streamed.status_code == 413 and str(MAX_BODY) in streamed.json()["detail"]
    # 5 a minute: the three refused posts took three, two reads are left, the third waits.
    statuses = [
        (await api.get(f"{BASE}/{seeded}/profile", headers=_auth(writer))).status_code
        for _ in range(4)
    ]
    assert statuses == [200, 200, 429, 429]
    limited = await api.get(f"{BASE}/{seeded}/profile", headers=_auth(writer))
    assert limited.status_code == 429 and int(limited.headers["retry-after"]) >= 1
    assert "5 requests a minute" in limited.json()["detail"]
    other = await _key(pool, seeded, "read")  # limits are per key
    assert (await api.get(f"{BASE}/{seeded}/profile", headers=_auth(other))).status_code == 200
    # Every refusal seen here is documented for its route, with the error body's schema.
    doc = (await api.get("/openapi.json", headers=_auth(other))).json()
    for refused in (text, big, streamed, limited):
        check(doc, refused)
