"""What every value from outside must pass before it goes anywhere, checked once at the edge.

PostgreSQL refuses NUL in text and UTF-8 has no lone surrogates, so either would fail late
(in the worker, after retries) or break a response; numbers beyond a bigint and dates at the
ends of Python's calendar overflow in arithmetic. `decode_json` + `check_json` cover a whole
request body in one pass, naming the offending field by its path (`items.0.content`, the
style pydantic uses); `check_text` and `check_instant` cover path and query parameters.
"""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, datetime

from engine.errors import InvalidInput, Unprocessable
from engine.limits import EARLIEST_INSTANT, LATEST_INSTANT, MAX_JSON_DEPTH, MAX_JSON_INT

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def text_problem(value: str) -> str | None:
    """Why `value` cannot be stored as text, or None when it can."""
    found = _UNSTORABLE.search(value)
    if found is None:
        return None
    if found.group() == "\x00":
        return "contains a NUL character (\\u0000), which cannot be stored"
    return "contains a lone surrogate (\\ud800-\\udfff), which is not valid Unicode text"


def check_text(value: str, field: str) -> str:
    problem = text_problem(value)
    if problem is not None:
        raise Unprocessable(field, problem)
    return value


def printable(value: str) -> str:
    """`value` safe to echo in an error: control characters, surrogates, non-ASCII escaped."""
    return value.encode("unicode_escape").decode("ascii")


def decode_json(raw: bytes) -> object:
    """A request body parsed as JSON; every way it can be unreadable is a 400 on `body`."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(
            "body", f"is not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start})"
        ) from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInput("body", f"is not valid JSON ({exc.msg} at {exc.pos})") from exc
    except RecursionError as exc:
        raise InvalidInput("body", f"nests deeper than {MAX_JSON_DEPTH} levels") from exc
    except ValueError as exc:  # an integer literal over Python's 4,300-digit conversion limit
        raise InvalidInput("body", "holds a number too large to read") from exc


def _join(path: str, part: str) -> str:
    return f"{path}.{part}" if path else part


def check_json(value: object, root: str = "") -> None:
    """Every string (keys too) storable, every number finite and within a bigint, and no
    deeper nesting than MAX_JSON_DEPTH. Iterative, so depth cannot exhaust the stack."""
    stack: list[tuple[object, str, int]] = [(value, root, 0)]
    while stack:
        node, path, depth = stack.pop()
        field = path or "body"
        if isinstance(node, str):
            check_text(node, field)
        elif isinstance(node, bool) or node is None:
            continue
        elif isinstance(node, int):
            if not -MAX_JSON_INT <= node <= MAX_JSON_INT:
                raise Unprocessable(field, "is out of range (beyond a 64-bit integer)")
        elif isinstance(node, float):
            if not math.isfinite(node):
                raise Unprocessable(field, "must be a finite number (not NaN or infinity)")
        elif isinstance(node, dict | list):
            if depth >= MAX_JSON_DEPTH:
                raise Unprocessable(field, f"nests deeper than {MAX_JSON_DEPTH} levels")
            if isinstance(node, dict):
                for key, child in node.items():
                    problem = text_problem(key)
                    if problem is not None:
                        raise Unprocessable(_join(path, printable(key)), f"key {problem}")
                    stack.append((child, _join(path, key), depth + 1))
            else:
                stack.extend(
                    (child, _join(path, str(i)), depth + 1) for i, child in enumerate(node)
                )


def check_instant(value: datetime, field: str) -> datetime:
    """`value` (naive means UTC) if every arithmetic recall does on it stays in range."""
    aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    try:
        utc = aware.astimezone(UTC)
    except OverflowError as exc:
        raise Unprocessable(field, _RANGE) from exc
    if not EARLIEST_INSTANT <= utc <= LATEST_INSTANT:
        raise Unprocessable(field, _RANGE)
    return aware


_RANGE = (
    f"must lie between {EARLIEST_INSTANT.date().isoformat()} and "
    f"{LATEST_INSTANT.date().isoformat()} (UTC)"
)
