"""LoCoMo-style files: conversations of dated sessions of turns.

`[{"sample_id", "conversation": {"speaker_a", "speaker_b", "session_<n>_date_time",
"session_<n>": [{"speaker", "text", "dia_id", "blip_caption"?}]}}]` (a single object works
too). Each conversation is one document (id `sample_id`), each session one item dated by its
session date, so "yesterday" in a session resolves against that session.
"""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, Final

from engine.imports.jsonl import Draft
from engine.imports.model import ImportOptions, RecordError, SourceFile
from engine.imports.records import Message, RecordInvalid, group_messages, parse_timestamp

_SESSION: Final = re.compile(r"session_(\d+)")
# "1:56 pm on 8 May, 2023"; strptime matches %p and %B case-insensitively.
_SESSION_DATE: Final = "%I:%M %p on %d %B, %Y"


def looks_like_locomo(data: object) -> bool:
    first = data[0] if isinstance(data, list) and data else data
    if not isinstance(first, dict) or not isinstance(first.get("conversation"), dict):
        return False
    return any(_SESSION.fullmatch(key) for key in first["conversation"])


def session_date(raw: object) -> datetime | None:
    if isinstance(raw, str):
        try:
            return datetime.strptime(raw.strip(), _SESSION_DATE).replace(tzinfo=UTC)
        except ValueError:
            pass
    return parse_timestamp(raw)


def _turn(raw: object) -> Message:
    if not isinstance(raw, dict):
        raise RecordInvalid("is not a JSON object")
    speaker, text = raw.get("speaker"), raw.get("text")
    if not isinstance(speaker, str) or not speaker.strip():
        raise RecordInvalid("has no speaker")
    if not isinstance(text, str) or not text.strip():
        raise RecordInvalid("has no text")
    caption = raw.get("blip_caption")
    if isinstance(caption, str) and caption.strip():
        text = f"{text} [shares {caption.strip()}]"
    return Message(speaker.strip(), text.strip(), None)


def _sessions(body: dict[str, Any]) -> list[int]:
    return sorted(
        int(m.group(1))
        for key, value in body.items()
        if (m := _SESSION.fullmatch(key)) is not None and isinstance(value, list)
    )


def parse_locomo(
    source: SourceFile, data: object, options: ImportOptions, errors: list[RecordError]
) -> list[Draft]:
    where = source.name or "content"
    conversations = data if isinstance(data, list) else [data]
    drafts: list[Draft] = []
    for index, raw in enumerate(conversations, start=1):
        position = f"{where} conversation {index}"
        body = raw.get("conversation") if isinstance(raw, dict) else None
        if not isinstance(raw, dict) or not isinstance(body, dict):
            errors.append(RecordError(position, "has no conversation object"))
            continue
        sample = raw.get("sample_id")
        document_id = str(sample) if isinstance(sample, str | int) and sample != "" else ""
        document_id = document_id or f"{source.name or 'locomo'}:{index}"
        position += f" ({document_id})"
        items = []
        turns = 0
        for number in _sessions(body):
            where_session = f"{position} session {number}"
            try:
                date = session_date(body.get(f"session_{number}_date_time"))
            except RecordInvalid as exc:
                errors.append(RecordError(where_session, f"date: {exc}"))
                continue
            messages: list[Message] = []
            for turn_number, turn in enumerate(body[f"session_{number}"], start=1):
                try:
                    message = _turn(turn)
                except RecordInvalid as exc:
                    errors.append(RecordError(f"{where_session} turn {turn_number}", str(exc)))
                    continue
                messages.append(Message(message.speaker, message.text, date))
            turns += len(messages)
            items += [
                replace(item, metadata={"session": str(number)})
                for item in group_messages(messages)
            ]
        if items:
            drafts.append(Draft(document_id, items, turns))
    return drafts
