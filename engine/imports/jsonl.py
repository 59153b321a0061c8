"""JSON Lines of messages (or a JSON array of them), and Engram's own export lines.

A record with a `speaker`, `name` or `role` is a chat message: messages are grouped per
`conversation_id` into one item per day. A record without one is an item as it is, with
its `document_id`, `timestamp`, `context`, `metadata` and `tags`: that is what
`engram export` writes, so an export imports back unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from engine.errors import Unprocessable
from engine.imports.model import ImportOptions, RecordError, SourceFile, fallback_document_id
from engine.imports.records import (
    Message,
    RecordInvalid,
    as_text,
    group_messages,
    parse_timestamp,
    text_items,
)
from engine.retain.payloads import RetainItem
from engine.validation import check_json

_TEXT_KEYS = ("content", "text", "message")
_TIME_KEYS = ("timestamp", "time", "created_at", "create_time", "date")
_ID_KEYS = ("conversation_id", "document_id", "conversation")


@dataclass(frozen=True)
class Draft:
    """A document as one file describes it, before documents of one id are merged."""

    document_id: str
    items: list[RetainItem]
    records: int


def role_speaker(role: str, options: ImportOptions) -> str:
    lowered = role.strip().lower()
    if lowered in ("user", "human"):
        return options.user_name
    if lowered in ("assistant", "ai", "bot", "model"):
        return options.assistant_name
    return role.strip().capitalize()


def _string(value: object, key: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise RecordInvalid(f"{key} must be a string")
    return value


def _metadata(value: object) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise RecordInvalid("metadata must be an object")
    result: dict[str, str] = {}
    for key, item in value.items():
        if isinstance(item, dict | list):
            raise RecordInvalid(f"metadata.{key} must be a string, number or boolean")
        result[str(key)] = item if isinstance(item, str) else str(item)
    return result


def _tags(value: object) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        raise RecordInvalid("tags must be a list of strings")
    return list(value)


def _record(value: object, options: ImportOptions) -> tuple[str | None, Message | RetainItem]:
    if not isinstance(value, dict):
        raise RecordInvalid("is not a JSON object")
    text = next((t for k in _TEXT_KEYS if (t := as_text(value.get(k))) is not None), None)
    if text is None or not text.strip():
        raise RecordInvalid("has no content")
    raw_id = next((value[k] for k in _ID_KEYS if value.get(k) not in (None, "")), None)
    if raw_id is not None and not isinstance(raw_id, str | int):
        raise RecordInvalid("conversation_id must be a string or an integer")
    stamp = parse_timestamp(next((value[k] for k in _TIME_KEYS if k in value), None))
    context = _string(value.get("context"), "context")
    metadata = _metadata(value.get("metadata"))
    tags = _tags(value.get("tags"))
    speaker: str | None = None
    for key in ("speaker", "name"):
        found = value.get(key)
        if found is not None:
            if not isinstance(found, str):
                raise RecordInvalid(f"{key} must be a string")
            speaker = found.strip() or None
            break
    role = value.get("role")
    if speaker is None and role is not None:
        if not isinstance(role, str):
            raise RecordInvalid("role must be a string")
        speaker = role_speaker(role, options) if role.strip() else None
    document_id = None if raw_id is None else str(raw_id)
    if speaker is None and ("speaker" not in value and "name" not in value and "role" not in value):
        return document_id, RetainItem(text, stamp, context, metadata, [], tags)
    return document_id, Message(speaker, text.strip(), stamp, context, metadata, tags)


def lines_of(source: SourceFile) -> Iterator[tuple[str, str]]:
    """(position, line) of each non-empty line."""
    where = source.name or "content"
    for number, line in enumerate(source.content.split("\n"), start=1):
        if line.strip():
            yield f"{where} line {number}", line


def parse_records(
    source: SourceFile,
    records: Iterable[tuple[str, object]],
    options: ImportOptions,
    errors: list[RecordError],
) -> list[Draft]:
    """Documents of decoded records, in the order their ids first appear."""
    entries: dict[str | None, list[Message | RetainItem]] = {}
    first_text = ""
    for position, value in records:
        try:
            document_id, entry = _record(value, options)
        except RecordInvalid as exc:
            errors.append(RecordError(position, str(exc)))
            continue
        if not first_text:
            first_text = entry.content if isinstance(entry, RetainItem) else entry.text
        entries.setdefault(document_id, []).append(entry)
    drafts: list[Draft] = []
    for document_id, found in entries.items():
        items: list[RetainItem] = []
        run: list[Message] = []
        for entry in found:
            if isinstance(entry, Message):
                run.append(entry)
                continue
            items += group_messages(run)
            run = []
            items += [
                RetainItem(
                    p.content, entry.timestamp, entry.context, entry.metadata, [], entry.tags
                )
                for p in text_items(entry.content, entry.timestamp)
            ]
        items += group_messages(run)
        name = document_id if document_id is not None else fallback_document_id(source, first_text)
        drafts.append(Draft(name, items, len(found)))
    return drafts


def loads(text: str) -> object:
    """`json.loads` where absurd nesting, or text that cannot be stored (a NUL, a lone
    surrogate, a number beyond a bigint), is one more bad record, not a crash."""
    try:
        value = json.loads(text)
    except RecursionError as exc:
        raise ValueError("nested too deeply") from exc
    try:
        check_json(value)
    except Unprocessable as exc:
        raise ValueError(str(exc)) from exc
    return value


def decode_lines(source: SourceFile, errors: list[RecordError]) -> Iterator[tuple[str, object]]:
    for position, line in lines_of(source):
        try:
            yield position, loads(line)
        except ValueError as exc:
            errors.append(RecordError(position, f"not valid JSON ({exc})"))
