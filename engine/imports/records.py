"""Shared steps of the parsers: timestamps, messages grouped into retain items, and the
size limits applied to items and documents.

Messages are grouped per conversation into one item per calendar day (their first
timestamp stands for the day), so a day of chat is extracted together and relative dates
("yesterday") resolve against that day. An item's content is JSON Lines of turn objects
(`{"speaker": ..., "content": ...}`), which the chunker renders as `Speaker: text` lines and
which keeps every line of a multi-line message with its speaker.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime

from engine.errors import Unprocessable
from engine.imports.model import MAX_DOCUMENT_CHARS, MAX_ITEM_CHARS, ImportDocument
from engine.retain.payloads import RetainItem
from engine.validation import check_instant

# Epoch numbers above this are milliseconds (1e11 s is in the year 5138).
_MILLISECONDS_FROM = 100_000_000_000


class RecordInvalid(ValueError):
    """One record cannot be imported; the parser adds where it is."""


@dataclass(frozen=True)
class Message:
    speaker: str | None
    text: str
    timestamp: datetime | None
    context: str = ""
    metadata: dict[str, str] = field(default_factory=dict)
    tags: list[str] = field(default_factory=list)


def parse_timestamp(raw: object) -> datetime | None:
    """ISO-8601 datetime or date, or epoch seconds/milliseconds; None or "" or "unset" for
    none. Naive values are UTC."""
    if raw is None or raw in ("", "unset"):
        return None
    if isinstance(raw, bool):
        raise RecordInvalid(f"timestamp {raw!r} is not a date")
    if isinstance(raw, int | float):
        seconds = raw / 1000 if raw > _MILLISECONDS_FROM else raw
        try:
            return datetime.fromtimestamp(seconds, UTC)
        except (OverflowError, OSError, ValueError) as exc:
            raise RecordInvalid(f"timestamp {raw!r} is out of range") from exc
    if not isinstance(raw, str):
        raise RecordInvalid(f"timestamp must be a string or a number, got {type(raw).__name__}")
    text = raw.strip()
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        try:
            day = date.fromisoformat(text)
        except ValueError as exc:
            raise RecordInvalid(f"timestamp {raw!r} is not ISO-8601") from exc
        value = datetime(day.year, day.month, day.day)
    try:
        return check_instant(value, "timestamp")
    except Unprocessable as exc:
        raise RecordInvalid(f"timestamp {raw!r} {exc.message}") from exc


def as_text(value: object) -> str | None:
    """Message text: a string, or a list of strings / `{"text": ...}` parts."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = [
            p if isinstance(p, str) else p.get("text") for p in value if isinstance(p, dict | str)
        ]
        texts = [p for p in parts if isinstance(p, str) and p.strip()]
        return "\n\n".join(texts) if texts else None
    return None


def split_text(text: str, limit: int) -> list[str]:
    """Pieces of at most `limit` characters, cut after paragraphs, else lines, else anywhere."""
    if len(text) <= limit:
        return [text]
    pieces: list[str] = []
    rest = text
    while len(rest) > limit:
        window = rest[:limit]
        cut = window.rfind("\n\n")
        if cut <= 0:
            cut = window.rfind("\n")
        if cut <= 0:
            cut = window.rfind(" ")
        cut = cut if cut > 0 else limit
        pieces.append(rest[:cut].rstrip())
        rest = rest[cut:].lstrip()
    if rest.strip():
        pieces.append(rest)
    return [p for p in pieces if p.strip()]


def _render(messages: list[Message]) -> str:
    if not any(m.speaker for m in messages):
        return "\n\n".join(m.text for m in messages)
    lines = []
    for m in messages:
        turn = {"speaker": m.speaker, "content": m.text} if m.speaker else {"content": m.text}
        lines.append(json.dumps(turn, ensure_ascii=False))
    return "\n".join(lines)


def _day(message: Message) -> date | None:
    return message.timestamp.date() if message.timestamp else None


def _pieces(messages: Iterable[Message], limit: int) -> Iterator[Message]:
    for m in messages:
        for piece in split_text(m.text, limit):
            yield Message(m.speaker, piece, m.timestamp, m.context, m.metadata, m.tags)


def group_messages(messages: Iterable[Message]) -> list[RetainItem]:
    """One item per run of messages on the same day with the same context, kept under
    MAX_ITEM_CHARS (a longer day continues in a second item)."""
    items: list[RetainItem] = []
    group: list[Message] = []
    size = 0

    def flush() -> None:
        if group:
            first = group[0]
            items.append(
                RetainItem(
                    content=_render(group),
                    timestamp=first.timestamp,
                    context=first.context,
                    metadata=dict(first.metadata),
                    tags=list(first.tags),
                )
            )

    # Room for the JSON quoting of a piece: escapes can roughly double its length.
    for message in _pieces(messages, MAX_ITEM_CHARS // 3):
        cost = len(message.text) + 40
        if group and (
            _day(message) != _day(group[0])
            or message.context != group[0].context
            or message.tags != group[0].tags
            or size + cost > MAX_ITEM_CHARS
        ):
            flush()
            group, size = [], 0
        group.append(message)
        size += cost
    flush()
    return items


def text_items(text: str, timestamp: datetime | None, context: str = "") -> list[RetainItem]:
    return [
        RetainItem(content=p, timestamp=timestamp, context=context)
        for p in split_text(text, MAX_ITEM_CHARS)
    ]


def split_document(document_id: str, items: list[RetainItem], records: int) -> list[ImportDocument]:
    """The document, or its parts "<id>#2", "<id>#3"... when it is larger than
    MAX_DOCUMENT_CHARS; records are shared out in proportion to the characters."""
    parts: list[list[RetainItem]] = [[]]
    size = 0
    for item in items:
        if parts[-1] and size + len(item.content) > MAX_DOCUMENT_CHARS:
            parts.append([])
            size = 0
        parts[-1].append(item)
        size += len(item.content)
    if len(parts) == 1:
        return [ImportDocument(document_id, items, records)]
    total = sum(len(i.content) for i in items) or 1
    documents: list[ImportDocument] = []
    given = 0
    for number, part in enumerate(parts, start=1):
        share = (
            records - given
            if number == len(parts)
            else records * sum(len(i.content) for i in part) // total
        )
        given += share
        suffix = "" if number == 1 else f"#{number}"
        documents.append(ImportDocument(document_id + suffix, part, share))
    return documents
