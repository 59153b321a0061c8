"""The hostile requests of issue 18 (rows 1-7 and "also seen"): each is a 4xx naming the
field, or a success, and never a 500. Run without a worker: every one is refused (or
answered) at the edge, before a workflow could start."""

from __future__ import annotations

import json

import httpx
import pytest

from engine.db import Pool

BASE = "/v1/default/banks"
DEEP = 100_000
JSON = {"content-type": "application/json"}


def raw_json(value: object) -> bytes:
    """JSON with non-ASCII escaped, so a lone surrogate travels as `\\ud800`."""
    return json.dumps(value).encode()


async def send(
    client: httpx.AsyncClient, method: str, url: str, body: bytes | None = None
) -> httpx.Response:
    response = await client.request(method, url, content=body, headers=JSON)
    assert response.status_code < 500, (method, url, response.status_code, response.text)
    assert response.headers["content-type"].startswith("application/json"), response.text
    return response


async def make_bank(client: httpx.AsyncClient, bank: str) -> None:
    response = await client.put(f"{BASE}/{bank}", json={})
    assert response.status_code == 200, response.text


def json_routes(bank: str) -> list[tuple[str, str]]:
    return [
        ("POST", f"{BASE}/{bank}/memories"),
        ("POST", f"{BASE}/{bank}/memories/recall"),
        ("PUT", f"{BASE}/{bank}"),
        ("PATCH", f"{BASE}/{bank}/config"),
        ("POST", f"{BASE}/{bank}/import"),
        ("POST", f"{BASE}/{bank}/mental-models"),
        ("POST", f"{BASE}/{bank}/reflect"),
    ]


@pytest.mark.parametrize(
    "body",
    [b'\xff\xfe{"items": []}', b'{"items": [{"content": "caf\xe9"}]}'],
    ids=["utf16-bom", "latin1"],
)
async def test_row1_non_utf8_bodies_are_a_400_on_body(
    plain_api: httpx.AsyncClient, bank_id: str, body: bytes
) -> None:
    await make_bank(plain_api, bank_id)
    for method, url in json_routes(bank_id):
        response = await send(plain_api, method, url, body)
        assert response.status_code == 400, (url, response.text)
        assert response.json()["field"] == "body"
        assert "UTF-8" in response.json()["detail"]


@pytest.mark.parametrize(
    ("body", "status"),
    [
        (b"[" * DEEP, 400),
        (b'{"a":' * DEEP, 400),
        (b'{"items": [{"content": "x", "metadata": ' + b"[" * 80 + b"]" * 80 + b"}]}", 422),
    ],
    ids=["100k-lists", "100k-objects", "80-levels"],
)
async def test_row2_deep_nesting_is_refused(
    plain_api: httpx.AsyncClient, bank_id: str, body: bytes, status: int
) -> None:
    await make_bank(plain_api, bank_id)
    for method, url in json_routes(bank_id):
        response = await send(plain_api, method, url, body)
        assert response.status_code == status, (url, response.text)
        assert "nests deeper than 64 levels" in response.json()["detail"]


async def test_row3_huge_integers_are_refused(plain_api: httpx.AsyncClient, bank_id: str) -> None:
    await make_bank(plain_api, bank_id)
    recall = f"{BASE}/{bank_id}/memories/recall"
    digits = "9" * 5000
    response = await send(
        plain_api, "POST", recall, f'{{"query": "x", "max_tokens": {digits}}}'.encode()
    )
    assert (response.status_code, response.json()["field"]) == (400, "body")
    response = await send(plain_api, "POST", recall, raw_json({"query": "x", "max_tokens": 10**30}))
    assert (response.status_code, response.json()["field"]) == (422, "max_tokens")
    for path in ("/memories/list", "/documents", "/operations", "/entities"):
        response = await send(plain_api, "GET", f"{BASE}/{bank_id}{path}?limit={digits}")
        assert (response.status_code, response.json()["field"]) == (400, "limit"), path


def nul_cases(bank: str, bad: str) -> list[tuple[str, str, object, str]]:
    """(method, url, JSON body, field) with `bad` in one string of each kind."""
    memories = f"{BASE}/{bank}/memories"
    item = {"content": "fine"}
    return [
        ("PUT", f"{BASE}/{bank}", {"name": f"a{bad}b"}, "name"),
        ("POST", memories, {"items": [{"content": f"a{bad}b"}]}, "items.0.content"),
        ("POST", memories, {"items": [{**item, "context": bad}]}, "items.0.context"),
        ("POST", memories, {"items": [{**item, "tags": ["ok", bad]}]}, "items.0.tags.1"),
        ("POST", memories, {"items": [{**item, "metadata": {"k": bad}}]}, "items.0.metadata.k"),
        ("POST", memories, {"items": [{**item, "document_id": bad}]}, "items.0.document_id"),
        ("POST", f"{memories}/recall", {"query": f"what {bad}"}, "query"),
        ("POST", f"{BASE}/{bank}/import", {"content": f"line one{bad}"}, "content"),
        ("POST", f"{BASE}/{bank}/mental-models", {"name": bad, "source_query": "q"}, "name"),
    ]


@pytest.mark.parametrize("bad", ["\x00", "\ud800"], ids=["nul", "lone-surrogate"])
async def test_rows4_and_6_unstorable_text_is_a_422_naming_the_field(
    plain_api: httpx.AsyncClient, bank_id: str, bad: str
) -> None:
    await make_bank(plain_api, bank_id)
    for method, url, body, field in nul_cases(bank_id, bad):
        response = await send(plain_api, method, url, raw_json(body))
        assert response.status_code == 422, (field, response.text)
        assert response.json()["field"] == field
    bad_key = {"items": [{"content": "x", "metadata": {f"k{bad}": "v"}}]}
    response = await send(plain_api, "POST", f"{BASE}/{bank_id}/memories", raw_json(bad_key))
    assert response.status_code == 422
    assert response.json()["field"].startswith("items.0.metadata.k\\")
    # Inside an imported file, where the parser decodes the escape itself: a bad record.
    escaped = json.dumps({"content": f"a{bad}b", "timestamp": "2024-01-01"})
    body = {"content": escaped, "name": "chat.jsonl", "format": "jsonl"}
    response = await send(plain_api, "POST", f"{BASE}/{bank_id}/import", raw_json(body))
    assert (response.status_code, response.json()["field"]) == (400, "content")
    assert "nothing to import: 1 records unreadable" in response.json()["detail"]


async def test_row4_nul_in_path_and_query_parameters(
    plain_api: httpx.AsyncClient, bank_id: str
) -> None:
    await make_bank(plain_api, bank_id)
    response = await send(plain_api, "GET", f"{BASE}/a%00b/profile")
    assert (response.status_code, response.json()["field"]) == (422, "bank_id")
    response = await send(plain_api, "GET", f"{BASE}/{bank_id}/documents/a%00b")
    assert (response.status_code, response.json()["field"]) == (422, "document_id")
    for param in ("q", "document_id", "tags", "start_date"):
        response = await send(plain_api, "GET", f"{BASE}/{bank_id}/memories/list?{param}=a%00b")
        assert (response.status_code, response.json()["field"]) == (422, param)


async def test_nul_in_any_query_parameter_of_any_operation_is_never_a_500(
    plain_api: httpx.AsyncClient, bank_id: str
) -> None:
    """Every operation `/openapi.json` lists, each of its query parameters in turn holding a
    NUL (which PostgreSQL cannot store or compare): a 4xx (naming it, or a path parameter
    refused first), or an answer that ignored it, never a 500. Generic over the document, so
    a route added later is covered."""
    await make_bank(plain_api, bank_id)
    doc = (await plain_api.get("/openapi.json")).json()
    tried = 0
    for path, methods in doc["paths"].items():
        for method, operation in methods.items():
            if (method, path) == ("delete", "/v1/default/banks/{bank_id}"):
                continue
            url = path.replace("{bank_id}", bank_id)
            url = url.replace("{", "x").replace("}", "") if "{" in url else url
            for param in operation.get("parameters", []):
                if param["in"] != "query":
                    continue
                await make_bank(plain_api, bank_id)
                body = b"{}" if "requestBody" in operation else None
                await send(plain_api, method.upper(), f"{url}?{param['name']}=a%00b", body)
                tried += 1
    assert tried > 50


async def test_an_error_quotes_little_of_a_huge_input(
    plain_api: httpx.AsyncClient, bank_id: str
) -> None:
    """A 100,000-item list of wrong values or a 100,000-character date is refused with an
    answer of a few kilobytes, not one that quotes (or lists an error for) all of it."""
    await make_bank(plain_api, bank_id)
    recall = f"{BASE}/{bank_id}/memories/recall"
    response = await send(
        plain_api, "POST", recall, raw_json({"query": "x", "types": ["t"] * 10**5})
    )
    assert (response.status_code, response.json()["field"]) == (422, "types.0")
    assert len(response.content) < 10_000
    assert response.json()["detail"].endswith("; and 99,980 more errors")
    when = {"query": "x", "query_timestamp": "y" * 10**5}
    response = await send(plain_api, "POST", recall, raw_json(when))
    assert response.json()["field"] == "query_timestamp"
    assert len(response.content) < 10_000 and "characters cut" in response.json()["detail"]


async def test_a_refused_write_with_a_nul_in_its_path_is_audited(
    plain_api: httpx.AsyncClient, pool: Pool, bank_id: str
) -> None:
    """PostgreSQL holds no NUL, in text or in JSON: the audit entry of such an attempt keeps
    the escape instead, rather than failing to record it."""
    await make_bank(plain_api, bank_id)
    response = await send(plain_api, "DELETE", f"{BASE}/{bank_id}/documents/a%00b")
    assert (response.status_code, response.json()["field"]) == (422, "document_id")
    response = await send(plain_api, "POST", f"{BASE}/x%00y/memories", raw_json({"items": []}))
    assert response.status_code == 422
    async with pool.acquire() as conn:
        paths = await conn.fetch(
            "SELECT bank_id, request->>'path' AS path, status FROM audit_logs"
            " WHERE bank_id = ANY($1::text[]) ORDER BY started_at",
            [bank_id, "x\\u0000y"],
        )
    recorded = [(r["bank_id"], r["path"], r["status"]) for r in paths]
    assert (bank_id, f"{BASE}/{bank_id}/documents/a\\u0000b", 422) in recorded
    assert ("x\\u0000y", f"{BASE}/x\\u0000y/memories", 422) in recorded


async def test_row5_an_invalid_uuid_filter_is_a_422(
    plain_api: httpx.AsyncClient, bank_id: str
) -> None:
    await make_bank(plain_api, bank_id)
    url = f"{BASE}/{bank_id}/memories/list?entity_id=not-a-uuid"
    response = await send(plain_api, "GET", url)
    assert (response.status_code, response.json()["field"]) == (422, "entity_id")


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        ({"query": "what did I do last year", "query_timestamp": "0001-06-01"}, 200, None),
        ({"query": "what will I do next year", "query_timestamp": "9999-06-01"}, 200, None),
        ({"query": "what happened in 9999", "query_timestamp": "9999-06-01"}, 200, None),
        ({"query": "x", "query_timestamp": "0001-01-01T00:00:00+14:00"}, 422, "query_timestamp"),
        (
            {"query": "x", "temporal_window": {"start": "0001-01-01", "end": "9999-12-31"}},
            422,
            "temporal_window.start",
        ),
        (
            {"query": "x", "temporal_window": {"start": "0001-01-02", "end": "9999-12-31"}},
            422,
            "temporal_window.end",
        ),
        (
            {"query": "x", "temporal_window": {"start": "0001-01-02", "end": "9999-12-29"}},
            200,
            None,
        ),
    ],
    ids=[
        "year1-last-year",
        "year9999-next-year",
        "bare-9999",
        "ts-overflow",
        "w-start",
        "w-end",
        "w-widest",
    ],
)
async def test_row7_dates_at_the_ends_of_the_calendar(
    plain_api: httpx.AsyncClient,
    bank_id: str,
    body: dict[str, object],
    status: int,
    field: str | None,
) -> None:
    await make_bank(plain_api, bank_id)
    response = await send(plain_api, "POST", f"{BASE}/{bank_id}/memories/recall", raw_json(body))
    assert response.status_code == status, response.text
    assert response.json().get("field") == field


async def test_row7_list_dates_that_overflow_are_a_422(
    plain_api: httpx.AsyncClient, bank_id: str
) -> None:
    await make_bank(plain_api, bank_id)
    base = f"{BASE}/{bank_id}/memories/list"
    for param, value in (
        ("start_date", "0001-01-01T00:00:00+14:00"),
        ("end_date", "9999-12-31T23:59:59-12:00"),
    ):
        response = await plain_api.get(base, params={param: value})
        assert (response.status_code, response.json()["field"]) == (422, param), response.text
    response = await plain_api.get(base, params={"start_date": "0002-01-01T00:00:00+14:00"})
    assert response.status_code == 200, response.text


async def test_row7_retain_timestamps_off_the_calendar_are_a_422(
    plain_api: httpx.AsyncClient, bank_id: str
) -> None:
    for stamp in ("9999-12-31T23:59:59-12:00", "0001-01-01T00:00:00+14:00"):
        body = {"items": [{"content": "x"}, {"content": "y", "timestamp": stamp}]}
        response = await send(plain_api, "POST", f"{BASE}/{bank_id}/memories", raw_json(body))
        assert (response.status_code, response.json()["field"]) == (422, "items.1.timestamp")
    assert (await plain_api.get(f"{BASE}/{bank_id}/profile")).status_code == 404  # not created


async def test_patching_the_config_of_an_unknown_bank_is_a_404(
    plain_api: httpx.AsyncClient, bank_id: str
) -> None:
    body = raw_json({"updates": {"retain_mission": "x"}})
    response = await send(plain_api, "PATCH", f"{BASE}/{bank_id}/config", body)
    assert response.status_code == 404
    response = await send(plain_api, "GET", f"{BASE}/{bank_id}/profile")
    assert response.status_code == 404


async def test_limits_name_the_field_and_the_limit(
    plain_api: httpx.AsyncClient, bank_id: str
) -> None:
    response = await send(
        plain_api, "PUT", f"{BASE}/{bank_id}", raw_json({"name": "n" * 5_000_000})
    )
    assert (response.status_code, response.json()["field"]) == (422, "name")
    await make_bank(plain_api, bank_id)
    memories = f"{BASE}/{bank_id}/memories"
    big_context = {"items": [{"content": "x", "context": "c" * 2_000_000}]}
    response = await send(plain_api, "POST", memories, raw_json(big_context))
    assert (response.status_code, response.json()["field"]) == (422, "items.0.context")
    over = {"items": [{"content": "x" * 900_000}, {"content": "y" * 700_000}]}
    response = await send(plain_api, "POST", memories, raw_json(over))
    assert response.status_code == 413
    assert response.json()["field"] == "items"
    assert response.json()["limit"] == "MAX_REQUEST_CHARS"
    many_tags = {"items": [{"content": "x", "tags": [f"t{i}" for i in range(101)]}]}
    response = await send(plain_api, "POST", memories, raw_json(many_tags))
    assert (response.status_code, response.json()["field"]) == (422, "items.0.tags")
    response = await send(plain_api, "GET", f"{BASE}/{'b' * 201}/profile")
    assert response.status_code == 422
    assert response.json()["limit"] == "MAX_BANK_ID_CHARS"


@pytest.mark.parametrize("literal", [b"NaN", b"Infinity", b"-Infinity", b"1e999"])
async def test_non_finite_numbers_are_refused(
    plain_api: httpx.AsyncClient, bank_id: str, literal: bytes
) -> None:
    await make_bank(plain_api, bank_id)
    body = b'{"query": "x", "min_scores": {"semantic": ' + literal + b"}}"
    response = await send(plain_api, "POST", f"{BASE}/{bank_id}/memories/recall", body)
    assert (response.status_code, response.json()["field"]) == (422, "min_scores.semantic")


async def test_a_priority_past_the_integer_column_is_a_422(
    plain_api: httpx.AsyncClient, bank_id: str
) -> None:
    """Found by schemathesis (tests/api/test_fuzz.py): -7039304542 reached asyncpg."""
    await make_bank(plain_api, bank_id)
    for priority in (-7_039_304_542, 2**31):
        body = raw_json({"name": "n", "content": "c", "priority": priority})
        response = await send(plain_api, "POST", f"{BASE}/{bank_id}/directives", body)
        assert (response.status_code, response.json()["field"]) == (422, "priority")
    body = raw_json({"name": "n", "content": "c", "priority": 2**31 - 1})
    response = await send(plain_api, "POST", f"{BASE}/{bank_id}/directives", body)
    assert response.status_code == 200, response.text
