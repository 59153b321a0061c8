"""Conversations as packing units: turns read from a JSON array, JSON Lines or a ``Name:
text`` transcript, one unit per turn rendered ``Speaker: text``."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, Final

from engine.chunking.text import split, trim
from engine.chunking.units import Turn, Unit

_SPEAKER_KEYS: Final = ("speaker", "name", "role")  # "name" is more specific than "role"
_TEXT_KEYS: Final = ("content", "text", "message")
_ROLE_NAMES: Final = frozenset({"user", "assistant", "system", "human", "ai", "bot", "agent"})
_MAX_SPEAKER_CHARS: Final = 80
_MAX_NAME_CHARS: Final = 40
_JSON_WS: Final = " \t\n\r"

_TRANSCRIPT_LINE: Final = re.compile(
    r"[ \t]*(?P<name>[^\W\d_][\w.'’\-]*(?: [\w.'’\-]+){0,3})[ \t]*:[ \t]+(?P<text>\S)"
)


def turn_units(turns: Sequence[Turn], max_chars: int) -> list[Unit]:
    """One unit per turn, rendered ``Speaker: text``; a turn too long for a chunk is split
    by sentences and every piece repeats the speaker, so each line stays attributed."""
    units: list[Unit] = []
    for turn in turns:
        prefix = f"{turn.speaker}: " if turn.speaker else ""
        if len(prefix) + len(turn.text) <= max_chars:
            units.append(Unit(prefix + turn.text, turn.start, turn.end, "\n", speaker=turn.speaker))
            continue
        for number, (start, end) in enumerate(
            split(turn.text, 0, len(turn.text), max_chars - len(prefix))
        ):
            if turn.text_start is None:
                span = (turn.start, turn.end)
            else:
                first = turn.start if number == 0 else turn.text_start + start
                span = (first, turn.text_start + end)
            text = prefix + turn.text[start:end]
            units.append(Unit(text, span[0], span[1], "\n", speaker=turn.speaker))
    return units


def json_turns(content: str) -> list[Turn] | None:
    """Turns of a JSON array of turn objects, each with the span of its object."""
    decoder = json.JSONDecoder()
    i = _skip_ws(content, 0)
    if not content.startswith("[", i):
        return None
    i = _skip_ws(content, i + 1)
    items: list[tuple[Any, int, int]] = []
    while i < len(content) and content[i] != "]":
        try:
            value, end = decoder.raw_decode(content, i)
        except (ValueError, RecursionError):
            # Not JSON after all (or absurdly nested): the content is plain text.
            return None
        items.append((value, i, end))
        i = _skip_ws(content, end)
        if content.startswith(",", i):
            i = _skip_ws(content, i + 1)
        elif not content.startswith("]", i):
            return None
    if i >= len(content) or content[i + 1 :].strip(_JSON_WS):
        return None
    return _turns_from_objects(items)


def jsonl_turns(content: str) -> list[Turn] | None:
    """Turns of JSON Lines, one turn object a line."""
    if not content.lstrip(_JSON_WS).startswith("{"):
        return None
    items: list[tuple[Any, int, int]] = []
    pos = 0
    for line in content.split("\n"):
        span = trim(content, pos, pos + len(line))
        pos += len(line) + 1
        if span is None:
            continue
        try:
            value = json.loads(content[span[0] : span[1]])
        except (ValueError, RecursionError):
            return None
        items.append((value, span[0], span[1]))
    return _turns_from_objects(items)


def _turns_from_objects(items: Sequence[tuple[Any, int, int]]) -> list[Turn] | None:
    """Turns, if every object is turn-shaped and at least one names a speaker and says
    something; objects without text (e.g. a tool call with ``"content": null``) are skipped."""
    turns: list[Turn] = []
    for value, start, end in items:
        if not isinstance(value, dict) or not any(
            key in value for key in (*_SPEAKER_KEYS, *_TEXT_KEYS)
        ):
            return None
        text = next(
            (text for key in _TEXT_KEYS if (text := _as_text(value.get(key))) is not None), None
        )
        speaker = next(
            (
                found.strip()[:_MAX_SPEAKER_CHARS]
                for key in _SPEAKER_KEYS
                if isinstance(found := value.get(key), str) and found.strip()
            ),
            None,
        )
        if text is not None and text.strip():
            turns.append(Turn(speaker, text.strip(), start, end, None))
    if not any(turn.speaker for turn in turns):
        return None
    return turns


def _as_text(value: object) -> str | None:
    """A turn's text: a string, or a list of strings / ``{"text": ...}`` parts."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = [
            part if isinstance(part, str) else part.get("text")
            for part in value
            if isinstance(part, (str, dict))
        ]
        texts = [part for part in parts if isinstance(part, str)]
        return "\n".join(texts) if texts else None
    return None


def transcript_turns(content: str) -> list[Turn] | None:
    """Turns of a plain ``Name: text`` transcript.

    It counts as one when more than half of the non-empty lines start with a short
    capitalised name (or a role such as ``user``) and a colon, and names repeat (at most
    half as many distinct names as turn lines, or two), which keeps ``Key: value`` lists
    out. Other lines continue the turn above; lines before the first turn are a turn with
    no speaker.
    """
    # Each non-empty line as (start, end, speaker or None, where its text starts).
    lines: list[tuple[int, int, str | None, int]] = []
    pos = 0
    for line in content.splitlines(keepends=True):
        line_start = pos
        pos += len(line)
        span = trim(content, line_start, pos)
        if span is None:
            continue
        match = _TRANSCRIPT_LINE.match(line)
        name = match.group("name") if match else ""
        if (
            match
            and len(name) <= _MAX_NAME_CHARS
            and (name[0].isupper() or name.lower() in _ROLE_NAMES)
        ):
            lines.append((span[0], span[1], name, line_start + match.start("text")))
        else:
            lines.append((span[0], span[1], None, span[0]))
    names = [name for _, _, name, _ in lines if name is not None]
    if len(names) < 2 or 2 * len(names) <= len(lines) or len(set(names)) > max(2, len(names) // 2):
        return None
    spans: list[tuple[int, int, str | None, int]] = []
    for start, end, name, text_start in lines:
        if name is None and spans:  # a continuation line extends the turn above
            turn_start, _, speaker, turn_text_start = spans[-1]
            spans[-1] = (turn_start, end, speaker, turn_text_start)
        else:
            spans.append((start, end, name, text_start))
    return [
        Turn(name, content[text_start:end], start, end, text_start)
        for start, end, name, text_start in spans
    ]


def _skip_ws(text: str, i: int) -> int:
    while i < len(text) and text[i] in _JSON_WS:
        i += 1
    return i
