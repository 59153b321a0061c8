"""A model's trigger (Hindsight's MentalModelTriggerInput): merged, checked, and its crons.

A trigger arrives as a patch: on create over the defaults, on update over the stored one, so
a client that names one setting leaves the others alone. Only `refresh_cron` and
`full_refresh_cron` are scheduled (both start a full refresh: Engram has no delta mode yet,
so `mode: "delta"` is stored and answered, and refreshes are full).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from engine.errors import InvalidInput

DEFAULTS: dict[str, Any] = {
    "mode": "full",
    "refresh_after_consolidation": False,
    "exclude_mental_models": False,
    "keep_trace": False,
}
KEYS = (
    "budget",
    "mode",
    "refresh_after_consolidation",
    "refresh_cron",
    "full_refresh_cron",
    "min_refresh_interval_seconds",
    "fact_types",
    "exclude_mental_models",
    "exclude_mental_model_ids",
    "tags_match",
    "tag_groups",
    "include_chunks",
    "recall_max_tokens",
    "recall_chunks_max_tokens",
    "reflect_search_observations_max_tokens",
    "reflect_search_observations_include_entities",
    "response_schema",
    "keep_trace",
)
_CHOICES: dict[str, tuple[str, ...]] = {
    "mode": ("full", "delta"),
    "budget": ("low", "mid", "high"),
    "tags_match": ("any", "all", "any_strict", "all_strict", "exact"),
}
FACT_TYPES = ("world", "experience", "observation")

# Cron: five fields (minute hour day-of-month month day-of-week), each `*`, a number, a
# range, a list, with an optional `/step`; months and weekdays also by name. Or a macro.
_MACROS = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")
_FIELDS = (
    ("minute", 0, 59, ()),
    ("hour", 0, 23, ()),
    ("day of month", 1, 31, ()),
    (
        "month",
        1,
        12,
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"),
    ),
    ("day of week", 0, 7, ("sun", "mon", "tue", "wed", "thu", "fri", "sat")),
)
_ITEM = re.compile(r"^(\*|[0-9a-z]+(?:-[0-9a-z]+)?)(?:/([0-9]+))?$")


def cron_error(expression: str) -> str | None:
    """Why `expression` is not a cron expression Temporal schedules accept, or None."""
    text = expression.strip().lower()
    if text in _MACROS:
        return None
    parts = text.split()
    if len(parts) != len(_FIELDS):
        return f"needs 5 fields (minute hour day-of-month month day-of-week), got {len(parts)}"
    for part, (name, low, high, names) in zip(parts, _FIELDS, strict=True):
        for item in part.split(","):
            match = _ITEM.match(item)
            if match is None:
                return f"{name} field {part!r} is not valid"
            if match.group(2) is not None and int(match.group(2)) == 0:
                return f"{name} field {part!r} has a zero step"
            if match.group(1) == "*":
                continue
            for bound in match.group(1).split("-"):
                value = _value(bound, low, names)
                if value is None or not low <= value <= high:
                    return f"{name} value {bound!r} is outside {low}..{high}"
    return None


def _value(token: str, low: int, names: tuple[str, ...]) -> int | None:
    """A cron field's number; names count from the field's low end (jan = 1, sun = 0)."""
    if token.isdigit():
        return int(token)
    if token in names:
        return names.index(token) + low
    return None


def merge_trigger(stored: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """`patch` (the keys a client sent) over `stored`; null clears a setting (or restores
    its default). Unknown keys are ignored. Raises InvalidInput naming the field."""
    merged: dict[str, Any] = {**DEFAULTS, **stored}
    for key, value in patch.items():
        if key not in KEYS:
            continue
        if value is None:
            merged.pop(key, None)
            if key in DEFAULTS:
                merged[key] = DEFAULTS[key]
        else:
            merged[key] = value
    check_trigger(merged)
    return merged


def check_trigger(trigger: Mapping[str, Any]) -> None:
    for key, choices in _CHOICES.items():
        value = trigger.get(key)
        if value is not None and value not in choices:
            raise InvalidInput(f"trigger.{key}", f"must be one of {', '.join(choices)}")
    for key in ("refresh_cron", "full_refresh_cron"):
        value = trigger.get(key)
        if value is None:
            continue
        if not isinstance(value, str) or not value.strip():
            raise InvalidInput(f"trigger.{key}", "must be a cron expression")
        error = cron_error(value)
        if error is not None:
            raise InvalidInput(f"trigger.{key}", f"{value!r} is not a cron expression: {error}")
    interval = trigger.get("min_refresh_interval_seconds")
    if interval is not None and (not isinstance(interval, int) or interval < 0):
        raise InvalidInput("trigger.min_refresh_interval_seconds", "must be an integer >= 0")
    for fact_type in trigger.get("fact_types") or []:
        if fact_type not in FACT_TYPES:
            raise InvalidInput("trigger.fact_types", f"must be among {', '.join(FACT_TYPES)}")


def crons_of(trigger: Mapping[str, Any]) -> list[str]:
    """The cron expressions a schedule should run, in a stable order (none: no schedule)."""
    crons = [trigger.get("refresh_cron"), trigger.get("full_refresh_cron")]
    return list(dict.fromkeys(c.strip() for c in crons if isinstance(c, str) and c.strip()))


def schedule_id_for(bank_id: str, model_id: str, kind: str) -> str:
    """The Temporal Schedule id of a model's cron, recognisable in the Temporal UI."""
    prefix = "engram-report" if kind == "report" else "engram-mental-model"
    return f"{prefix}-{bank_id}-{model_id}"
