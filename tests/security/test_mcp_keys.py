"""ENGRAM_AUTH=keys through MCP tools (issue 16 on the MCP endpoint): the multi-bank endpoint
takes the bank from a tool argument, so the key is checked per call — a read key's write is
refused, a key of another bank finds no bank, and the right key works."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import mcp_types as types
import pytest
from argon2 import PasswordHasher
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from starlette.applications import Starlette
from support.serve import serve
from temporalio.worker import Worker

from engine.auth.keys import create_key
from engine.db import Pool
from engine.settings import LLMSettings, SecuritySettings, Settings

HASHER = PasswordHasher(time_cost=1, memory_cost=8, parallelism=1)


@pytest.fixture
def settings(
    tmp_path: Path, database_url: str, task_queue: str, llm_settings: LLMSettings
) -> Settings:
    return Settings(
        home=tmp_path,
        database_url=database_url,
        task_queue=task_queue,
        llm=llm_settings,
        security=SecuritySettings(auth="keys"),
    )


@pytest.fixture
async def url(app: Starlette, worker: Worker) -> AsyncIterator[str]:
    async with serve(app) as base:
        yield base


async def key(pool: Pool, bank_id: str | None, scope: str) -> str:
    async with pool.acquire() as conn:
        _, token = await create_key(conn, HASHER, bank_id=bank_id, scope=scope)
    return token


@asynccontextmanager
async def client(url: str, token: str) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        create_mcp_http_client(headers=headers) as http,
        Client(streamable_http_client(f"{url}/mcp/", http_client=http)) as mcp,
    ):
        yield mcp


async def outcome(mcp: Client, name: str, args: dict[str, Any]) -> tuple[bool, str]:
    result = await mcp.call_tool(name, args)
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return result.is_error, block.text


async def test_tool_calls_are_checked_against_the_keys_bank_and_scope(
    url: str, pool: Pool, bank_id: str
) -> None:
    admin = await key(pool, None, "admin")
    other = f"{bank_id}-other"
    async with httpx.AsyncClient(base_url=url) as raw:
        for bank in (bank_id, other):
            made = await raw.put(
                f"/v1/default/banks/{bank}",
                json={"extraction_mode": "local", "enable_observations": False},
                headers={"Authorization": f"Bearer {admin}"},
            )
            assert made.status_code == 200, made.text
    reader = await key(pool, bank_id, "read")
    writer = await key(pool, bank_id, "write")
    note = {"bank_id": bank_id, "content": "Ines: I keep bees.", "document_id": "bees"}

    async with client(url, reader) as mcp:
        refused, message = await outcome(mcp, "sync_retain", note)
        assert refused and "may not write" in message
        allowed, _ = await outcome(mcp, "recall", {"bank_id": bank_id, "query": "bees"})
        assert not allowed
        hidden, message = await outcome(mcp, "recall", {"bank_id": other, "query": "bees"})
        assert hidden and f"bank not found: {other}" in message

    async with client(url, writer) as mcp:
        failed, message = await outcome(mcp, "sync_retain", note)
        assert not failed, message
        failed, message = await outcome(mcp, "recall", {"bank_id": bank_id, "query": "bees"})
        assert not failed and "bees" in message
        hidden, message = await outcome(mcp, "sync_retain", {**note, "bank_id": other})
        assert hidden and f"bank not found: {other}" in message
