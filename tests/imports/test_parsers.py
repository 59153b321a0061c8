"""The import parsers: format detection, documents and items, and every bad record reported."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from engine.errors import InvalidInput
from engine.imports.model import MAX_DOCUMENT_CHARS, ImportOptions, SourceFile
from engine.imports.parse import detect_format, parse_import
from engine.imports.records import split_document
from engine.retain.payloads import RetainItem


def node(
    node_id: str,
    parent: str | None,
    role: str | None,
    text: str = "",
    created: float | None = None,
    **extra: Any,
) -> dict[str, Any]:
    message = None
    if role is not None:
        message = {
            "author": {"role": role},
            "create_time": created,
            "content": {"content_type": extra.pop("content_type", "text"), "parts": [text]},
            "metadata": extra.pop("metadata", {}),
        }
    return {"id": node_id, "parent": parent, "children": [], "message": message}


def chatgpt_export() -> list[dict[str, Any]]:
    day = datetime(2024, 4, 2, 9, 0, tzinfo=UTC).timestamp()
    nodes = [
        node("root", None, None),
        node("sys", "root", "system", "You are ChatGPT.", day),
        node("u1", "sys", "user", "I adopted a beagle named Pixel yesterday.", day),
        node("a-old", "u1", "assistant", "An abandoned answer.", day + 5),
        node("a1", "u1", "assistant", "Congratulations on adopting Pixel!", day + 10),
        node(
            "hidden",
            "a1",
            "user",
            "secret",
            day + 20,
            metadata={"is_visually_hidden_from_conversation": True},
        ),
        node("tool", "hidden", "tool", "search results", day + 30),
        node("u2", "tool", "user", "Pixel loves the beach in Porto.", day + 86_400),
        node("code", "u2", "assistant", "print(1)", day + 86_410, content_type="code"),
    ]
    return [
        {
            "id": "conv-123",
            "title": "Dog talk",
            "create_time": day,
            "current_node": "code",
            "mapping": {n["id"]: n for n in nodes},
        },
        {"id": "broken", "title": "Broken", "current_node": "x", "mapping": {}},
    ]


def texts(item: RetainItem) -> list[str]:
    return [
        json.loads(line)["speaker"] + ": " + json.loads(line)["content"]
        for line in item.content.splitlines()
    ]


def test_formats_are_detected_from_the_content() -> None:
    assert detect_format(SourceFile("x.json", json.dumps(chatgpt_export()))) == "chatgpt"
    locomo = [{"sample_id": "c", "conversation": {"session_1": []}}]
    assert detect_format(SourceFile("", json.dumps(locomo))) == "locomo"
    assert detect_format(SourceFile("", '{"role": "user", "content": "hi"}\n{bad')) == "jsonl"
    assert detect_format(SourceFile("", '[{"role": "user", "content": "hi"}]')) == "jsonl"
    assert detect_format(SourceFile("notes.md", "# Title\n\nSome text.")) == "text"


def test_chatgpt_follows_the_current_branch_and_leaves_internal_messages_out() -> None:
    parsed = parse_import(
        [SourceFile("conversations.json", json.dumps(chatgpt_export()))],
        ImportOptions(user_name="Sam"),
    )
    assert parsed.formats == ["chatgpt"]
    [document] = parsed.documents
    assert document.document_id == "conv-123"
    assert document.records == 3
    first_day, second_day = document.items
    assert texts(first_day) == [
        "Sam: I adopted a beagle named Pixel yesterday.",
        "Assistant: Congratulations on adopting Pixel!",
    ]
    assert texts(second_day) == ["Sam: Pixel loves the beach in Porto."]
    assert first_day.timestamp == datetime(2024, 4, 2, 9, 0, tzinfo=UTC)
    assert first_day.metadata == {"title": "Dog talk"}
    [error] = parsed.errors
    assert error.position == "conversations.json conversation 2 ('Broken')"
    assert "not in its mapping" in error.message


def test_locomo_sessions_become_dated_items_of_one_document_per_conversation() -> None:
    data = [
        {
            "sample_id": "conv-1",
            "conversation": {
                "session_1_date_time": "1:56 pm on 8 May, 2023",
                "session_1": [
                    {"speaker": "Caroline", "text": "I went to a support group yesterday."},
                    {"speaker": "Melanie", "text": "Look!", "blip_caption": "a photo of a lake"},
                    {"speaker": "Melanie"},
                ],
                "session_2_date_time": "7:00 pm on 20 June, 2023",
                "session_2": [{"speaker": "Caroline", "text": "Jon opened a dance studio."}],
            },
        }
    ]
    parsed = parse_import([SourceFile("locomo.json", json.dumps(data))], ImportOptions())
    [document] = parsed.documents
    assert (document.document_id, document.records) == ("conv-1", 3)
    assert [i.timestamp for i in document.items] == [
        datetime(2023, 5, 8, 13, 56, tzinfo=UTC),
        datetime(2023, 6, 20, 19, 0, tzinfo=UTC),
    ]
    assert texts(document.items[0])[1] == "Melanie: Look! [shares a photo of a lake]"
    assert [i.metadata for i in document.items] == [{"session": "1"}, {"session": "2"}]
    [error] = parsed.errors
    assert error.position == "locomo.json conversation 1 (conv-1) session 1 turn 3"
    assert error.message == "has no text"


def test_jsonl_messages_are_grouped_per_conversation_and_day() -> None:
    lines = [
        {
            "conversation_id": "a",
            "role": "user",
            "content": "one",
            "timestamp": "2024-01-01T08:00:00Z",
        },
        {"conversation_id": "b", "speaker": "Ana", "content": "other", "timestamp": 1704103200},
        {
            "conversation_id": "a",
            "role": "assistant",
            "content": "two",
            "timestamp": "2024-01-01T09:00:00Z",
        },
        {
            "conversation_id": "a",
            "role": "user",
            "content": [{"text": "three"}],
            "timestamp": "2024-01-02",
        },
    ]
    content = "\n".join(json.dumps(line) for line in lines)
    parsed = parse_import([SourceFile("chat.jsonl", content)], ImportOptions())
    a, b = parsed.documents
    assert (a.document_id, a.records, b.document_id, b.records) == ("a", 3, "b", 1)
    assert [texts(i) for i in a.items] == [["User: one", "Assistant: two"], ["User: three"]]
    assert a.items[1].timestamp == datetime(2024, 1, 2, tzinfo=UTC)
    assert b.items[0].timestamp == datetime(2024, 1, 1, 10, 0, tzinfo=UTC)


def test_every_bad_jsonl_record_is_reported_with_its_line() -> None:
    content = "\n".join(
        [
            '{"role": "user", "content": "fine"}',
            "{broken",
            "[1, 2]",
            "",
            '{"role": "user"}',
            '{"role": "user", "content": "x", "timestamp": "soon"}',
            '{"role": "user", "content": "x", "tags": "a"}',
            '{"role": 5, "content": "x"}',
        ]
    )
    parsed = parse_import([SourceFile("c.jsonl", content)], ImportOptions())
    assert parsed.records == 1
    assert [(e.position, e.message.split(" (")[0]) for e in parsed.errors] == [
        ("c.jsonl line 2", "not valid JSON"),
        ("c.jsonl line 3", "is not a JSON object"),
        ("c.jsonl line 5", "has no content"),
        ("c.jsonl line 6", "timestamp 'soon' is not ISO-8601"),
        ("c.jsonl line 7", "tags must be a list of strings"),
        ("c.jsonl line 8", "role must be a string"),
    ]
    with pytest.raises(InvalidInput) as raised:
        parse_import([SourceFile("c.jsonl", content)], ImportOptions(on_error="stop"))
    assert raised.value.field == "content"
    assert "c.jsonl line 2" in raised.value.message


def test_a_folder_of_notes_is_one_document_per_file() -> None:
    files = [
        SourceFile("notes/a.md", "# A\n\nAlice moved to Lisbon."),
        SourceFile("notes/b.txt", "Bob adopted a beagle."),
        SourceFile("notes/empty.md", "  \n"),
    ]
    parsed = parse_import(files, ImportOptions())
    assert [(d.document_id, d.records) for d in parsed.documents] == [
        ("notes/a.md", 1),
        ("notes/b.txt", 1),
    ]
    assert parsed.documents[0].items[0].timestamp is None
    assert [(e.position, e.message) for e in parsed.errors] == [("notes/empty.md", "is empty")]


def test_document_ids_are_stable_and_grow_only_at_the_end() -> None:
    first = '{"role": "user", "content": "hello there", "timestamp": "2024-01-01"}'
    more = '{"role": "user", "content": "and more", "timestamp": "2024-01-02"}'
    one = parse_import([SourceFile("", first)], ImportOptions())
    two = parse_import([SourceFile("", first + "\n" + more)], ImportOptions())
    assert one.documents[0].document_id == two.documents[0].document_id
    assert one.documents[0].document_id.startswith("import-")
    assert two.documents[0].items[0] == one.documents[0].items[0]


def test_a_document_too_large_for_one_payload_is_split_into_stable_parts() -> None:
    item = RetainItem("x" * (MAX_DOCUMENT_CHARS // 3), None)
    items = [item] * 7
    parts = split_document("big", items, 70)
    assert [p.document_id for p in parts] == ["big", "big#2", "big#3"]
    assert all(p.chars <= MAX_DOCUMENT_CHARS for p in parts)
    assert sum(p.records for p in parts) == 70
    grown = split_document("big", [*items, item], 80)
    assert [p.items for p in grown[:2]] == [p.items for p in parts[:2]]
