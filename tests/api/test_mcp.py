"""The MCP server, driven by the official SDK's client over Streamable HTTP (a real uvicorn
server) and over stdio (`engram mcp` as a subprocess): tools listed with schemas and hints,
retain → recall → reflect, every tool called, errors returned as tool errors."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from starlette.applications import Starlette
from support.fake_openai import FakeOpenAI, ToolCall, ToolCalls
from support.serve import serve
from temporalio.worker import Worker

from engine.settings import LLMSettings
from server.mcp_server.tools import TOOLS

ANSWER = "Ana lives in Lisbon since March 2024."


def answer(body: dict[str, Any]) -> ToolCalls:
    """Every reflect (and mental-model refresh) the scripted model sees ends at once."""
    return ToolCalls((ToolCall("done", json.dumps({"answer": ANSWER, "ids": []})),))


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(responder=answer) as server:
        yield server


@pytest.fixture
def llm_settings(fake: FakeOpenAI) -> LLMSettings:
    return LLMSettings(api_key="test-key", base_url=fake.base_url, model="fake", timeout_s=30)


@pytest.fixture
async def url(app: Starlette, worker: Worker) -> AsyncIterator[str]:
    async with serve(app) as base:
        yield base


def text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


async def call(client: Client, name: str, args: dict[str, Any]) -> str:
    result = await client.call_tool(name, args)
    assert not result.is_error, f"{name}: {text(result)}"
    return text(result)


async def failed(client: Client, name: str, args: dict[str, Any]) -> str:
    result = await client.call_tool(name, args)
    assert result.is_error, f"{name} should have failed: {text(result)}"
    return text(result)


async def local_bank(url: str, bank_id: str) -> None:
    """Local extraction and no consolidation: only reflect talks to the scripted model."""
    async with httpx.AsyncClient(base_url=url) as raw:
        response = await raw.put(
            f"/v1/default/banks/{bank_id}",
            json={"extraction_mode": "local", "enable_observations": False},
        )
        assert response.status_code == 200, response.text


async def audit_transports(url: str, bank_id: str) -> dict[str, set[str]]:
    """Each audited action of the bank, with the transports it came through."""
    async with httpx.AsyncClient(base_url=url) as raw:
        response = await raw.get(f"/v1/default/banks/{bank_id}/audit-logs", params={"limit": 500})
    assert response.status_code == 200, response.text
    found: dict[str, set[str]] = {}
    for entry in response.json()["items"]:
        found.setdefault(entry["action"], set()).add(entry["transport"])
    return found


async def test_multi_bank_retain_recall_reflect(url: str, bank_id: str) -> None:
    async with Client(f"{url}/mcp/") as client:
        listed = (await client.list_tools()).tools
        by_name = {t.name: t for t in listed}
        assert set(by_name) == {t.name for t in TOOLS}
        for tool in listed:
            needs_bank = tool.name != "list_banks"
            assert needs_bank == ("bank_id" in tool.input_schema.get("required", [])), tool.name
            assert tool.description and len(tool.description) > 40, tool.name
            assert tool.annotations is not None
        assert by_name["recall"].annotations and by_name["recall"].annotations.read_only_hint
        assert by_name["delete_bank"].annotations
        assert by_name["delete_bank"].annotations.destructive_hint

        created = await call(client, "create_bank", {"bank_id": bank_id, "name": "Ana's bank"})
        assert "Ana's bank" in created
        await local_bank(url, bank_id)
        stored = await call(
            client,
            "sync_retain",
            {
                "bank_id": bank_id,
                "content": "Ana: I moved to Lisbon in March 2024 and adopted a cat named Miso.",
                "timestamp": "2024-05-01T10:00:00Z",
                "document_id": "chat-1",
                "tags": ["home"],
            },
        )
        assert "chat-1" in stored
        found = await call(client, "recall", {"bank_id": bank_id, "query": "Where does Ana live?"})
        assert "Lisbon" in found and "2024-" in found and "[" in found
        assert not found.lstrip().startswith("{")  # text, not a JSON dump
        reflected = await call(client, "reflect", {"bank_id": bank_id, "query": "Where is Ana?"})
        assert ANSWER in reflected
        queued = await call(client, "retain", {"bank_id": bank_id, "content": "Ana likes figs."})
        assert "operation" in queued
        banks = await call(client, "list_banks", {})
        assert bank_id in banks

        assert "query" in await failed(client, "recall", {"bank_id": bank_id})
        assert "budget" in await failed(
            client, "recall", {"bank_id": bank_id, "query": "x", "budget": "huge"}
        )
        assert "bank_id is required" in await failed(client, "recall", {"query": "x"})
        missing = await failed(client, "get_bank", {"bank_id": f"nope-{bank_id}"})
        assert "nope-" in missing
        assert "unknown tool" in await failed(client, "teleport", {"bank_id": bank_id})
    transports = await audit_transports(url, bank_id)
    assert transports["POST /v1/default/banks/{bank_id}/memories"] == {"mcp"}
    assert transports["PUT /v1/default/banks/{bank_id}"] == {"mcp", "http"}  # tool, then raw


async def test_every_tool_on_the_single_bank_endpoint(url: str, bank_id: str) -> None:
    await local_bank(url, bank_id)
    async with Client(f"{url}/mcp/{bank_id}/") as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert not {"list_banks", "create_bank", "update_bank", "delete_bank"} & names
        assert "recall" in names
        for tool in (await client.list_tools()).tools:
            assert "bank_id" not in tool.input_schema.get("properties", {})
        await call(client, "sync_retain", {"content": "Bo: I play the cello.", "document_id": "d1"})
        assert "Bank " in await call(client, "get_bank", {})
        assert "memories" in await call(client, "get_bank_stats", {})
        memories = await call(client, "list_memories", {"limit": 5})
        memory_id = memories.split("[", 1)[1].split("]", 1)[0]
        assert "cello" in await call(client, "get_memory", {"memory_id": memory_id})
        fixed = {"memory_id": memory_id, "text": "Bo plays the viola.", "reason": "misheard"}
        assert "viola" in await call(client, "update_memory", fixed)
        dry = await call(client, "forget", {"memory_ids": [memory_id]})
        assert dry.startswith("Would erase 1 memories") and "viola" in dry
        assert "viola" in await call(client, "get_memory", {"memory_id": memory_id})
        assert "d1" in await call(client, "list_documents", {})
        assert "cello" in await call(client, "get_document", {"document_id": "d1"})
        operations = await call(client, "list_operations", {})
        operation_id = operations.splitlines()[1].split(":", 1)[0].removeprefix("- ")
        assert "completed" in await call(client, "get_operation", {"operation_id": operation_id})
        assert "already" in await failed(client, "cancel_operation", {"operation_id": operation_id})

        made = await call(
            client,
            "create_mental_model",
            {"name": "Bo's music", "source_query": "What does Bo play?", "mental_model_id": "bo"},
        )
        assert "bo" in made
        assert "bo" in await call(client, "list_mental_models", {})
        assert "Bo's music" in await call(client, "get_mental_model", {"mental_model_id": "bo"})
        renamed = await call(client, "update_mental_model", {"mental_model_id": "bo", "name": "Bo"})
        assert "Bo" in renamed
        assert "started" in await call(client, "refresh_mental_model", {"mental_model_id": "bo"})
        assert "Cleared" in await call(client, "clear_mental_model", {"mental_model_id": "bo"})
        assert "Deleted" in await call(client, "delete_mental_model", {"mental_model_id": "bo"})
        assert "No tags" in await call(client, "list_tags", {})
        rule = await call(client, "create_directive", {"name": "Units", "content": "Use metric"})
        directive_id = rule.removeprefix("Created ").split(" ", 1)[0]
        assert "Use metric" in await call(client, "list_directives", {})
        assert "Deleted" in await call(client, "delete_directive", {"directive_id": directive_id})
        assert "no longer true" in await call(client, "invalidate_memory", {"memory_id": memory_id})
        erased = await call(client, "forget", {"memory_ids": [memory_id], "dry_run": False})
        assert erased.startswith("Erased 1 memories")
        assert "not found" in await failed(client, "get_memory", {"memory_id": memory_id})
        await call(client, "sync_retain", {"content": "Bo: I bike to work.", "document_id": "d1"})
        deleted = await call(client, "delete_document", {"document_id": "d1"})
        assert "Deleted document d1" in deleted

    async with httpx.AsyncClient(base_url=url) as raw:
        response = await raw.patch(
            f"/v1/default/banks/{bank_id}/config",
            json={"updates": {"mcp_enabled_tools": ["recall", "get_bank"]}},
        )
        assert response.status_code == 200, response.text
        bad = await raw.patch(
            f"/v1/default/banks/{bank_id}/config",
            json={"updates": {"mcp_enabled_tools": ["recal"]}},
        )
        assert bad.status_code == 400 and bad.json()["field"] == "mcp_enabled_tools"
    async with Client(f"{url}/mcp/{bank_id}/") as client:
        assert {t.name for t in (await client.list_tools()).tools} == {"recall", "get_bank"}
        assert "disabled" in await failed(client, "list_memories", {})
    async with Client(f"{url}/mcp/") as client:
        assert "disabled" in await failed(client, "list_memories", {"bank_id": bank_id})


# Each argument of each tool in turn takes each of these: wrong types, blanks, a NUL, a value
# far over any limit, nesting.
HOSTILE: tuple[Any, ...] = (
    None,
    10**20,
    -1,
    "",
    "   ",
    "a\x00b",
    "y" * 100_000,
    ["a", 1, None],
    {"a": {"b": [1]}},
    True,
)


def plausible(schema: dict[str, Any]) -> Any:
    """A value of the property's type, to fill the required arguments not under test."""
    kinds = [s.get("type") for s in schema.get("anyOf", [schema])]
    if "enum" in schema:
        return schema["enum"][0]
    return {"integer": 1, "boolean": False, "array": [], "object": {}}.get(str(kinds[0]), "x")


async def test_hostile_arguments_to_every_tool_are_short_tool_errors(
    url: str, bank_id: str
) -> None:
    """Every tool on the single-bank endpoint, each argument in turn given each HOSTILE value:
    the call answers, with a result or a tool error of a few kilobytes at most, never a
    protocol error (the client raises) or an internal one. Generic over the tools listed, so
    a tool added later is covered."""
    await local_bank(url, bank_id)
    tried = 0
    async with Client(f"{url}/mcp/{bank_id}/") as client:
        await call(client, "sync_retain", {"content": "Bo: I play the cello.", "document_id": "d1"})
        for tool in (await client.list_tools()).tools:
            properties = tool.input_schema.get("properties", {})
            required = {n: plausible(properties[n]) for n in tool.input_schema.get("required", [])}
            for name in properties:
                for value in HOSTILE:
                    result = await client.call_tool(tool.name, {**required, name: value})
                    said = text(result)
                    assert "internal error" not in said, (tool.name, name, value, said)
                    assert not result.is_error or len(said) < 5_000, (tool.name, name, len(said))
                    tried += 1
    assert tried > 500


async def test_update_memory_resolves_entities_or_takes_them_literally(
    url: str, bank_id: str
) -> None:
    await local_bank(url, bank_id)
    async with Client(f"{url}/mcp/{bank_id}/") as client:
        [tool] = [t for t in (await client.list_tools()).tools if t.name == "update_memory"]
        described = tool.input_schema["properties"]["resolve_entities"]
        assert described["default"] is True and "literally" in described["description"]
        await call(client, "sync_retain", {"content": "My friend Layla Haddad lives in Cairo."})
        omar = {"content": "Omar booked the flight.", "document_id": "o"}
        await call(client, "sync_retain", omar)
        listed = await call(client, "list_memories", {"document_id": "o"})
        memory_id = listed.split("[", 1)[1].split("]", 1)[0]
        change = {"memory_id": memory_id, "entities": ["Layla"]}
        literal = await call(client, "update_memory", {**change, "resolve_entities": False})
        assert "entities: Layla\n" in literal  # taken as written: an entity of its own
        await call(client, "update_memory", {**change, "entities": ["Cairo"]})  # Layla is gone
        resolved = await call(client, "update_memory", change)
        assert "entities: Layla Haddad\n" in resolved  # matched to the Layla Haddad of Cairo


async def test_stdio_server_pinned_to_a_bank(url: str, bank_id: str) -> None:
    await local_bank(url, bank_id)
    engram = os.path.join(os.path.dirname(sys.executable), "engram")
    params = StdioServerParameters(
        command=engram,
        args=["mcp", "--bank", bank_id, "--url", url],
        env={"PATH": os.environ["PATH"]},
    )
    async with Client(params) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert "recall" in names and "list_banks" not in names
        await call(client, "sync_retain", {"content": "Cy: my sister Dee lives in Oslo."})
        assert "Oslo" in await call(client, "recall", {"query": "Where does Dee live?"})
        assert "query" in await failed(client, "recall", {})
    transports = await audit_transports(url, bank_id)
    assert transports["POST /v1/default/banks/{bank_id}/memories"] == {"mcp"}
