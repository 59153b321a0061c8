"""The `llm` fact extraction provider: one structured-output call per chunk.

Model output is validated and repaired (fences, trailing commas, loose dates, bad indexes)
rather than trusted; output that cannot be repaired is re-asked once with the reason, then
fails loudly as `ExtractionFailed`. Transport failures propagate as `LLMRequestError` so the
calling activity's retry policy handles them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError

from engine.errors import ExtractionFailed
from engine.lifecycle.importance import from_scale
from engine.llm import ChatResult, LLMClient, LLMOutputError, Usage, parse_json_lenient
from engine.types import EntityKind, ExtractedEntity, ExtractedFact, ItemContext

SCHEMA_NAME = "extracted_facts"
ENTITY_KINDS: tuple[EntityKind, ...] = (
    "person",
    "place",
    "organization",
    "product",
    "title",
    "event",
    "other",
)
_KIND_ALIASES: dict[str, EntityKind] = {
    "people": "person",
    "location": "place",
    "city": "place",
    "country": "place",
    "org": "organization",
    "company": "organization",
    "work": "title",
    "book": "title",
    "movie": "title",
    "film": "title",
}
Precision = Literal["instant", "day", "month", "year"]
_NO_DATE = frozenset({"", "null", "none", "unknown", "n/a", "na", "?"})
# Formats beyond ISO 8601 that models write, with the period each one names.
_DATE_FORMATS: tuple[tuple[str, Precision], ...] = (
    ("%Y-%m", "month"),
    ("%Y", "year"),
    ("%Y/%m/%d", "day"),
    ("%B %d, %Y", "day"),
    ("%b %d, %Y", "day"),
    ("%d %B %Y", "day"),
    ("%d %b %Y", "day"),
    ("%B %Y", "month"),
    ("%b %Y", "month"),
)
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_MAX_REASON_ERRORS = 5

_NULLABLE_STRING = {"type": ["string", "null"]}
_DATE = {
    "type": ["string", "null"],
    "description": "ISO 8601 date (2024-03-01) or date-time (2024-03-01T18:30:00), or null",
}
FACTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["facts"],
    "properties": {
        "facts": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": [
                    "text",
                    "fact_type",
                    "who",
                    "what",
                    "where",
                    "when",
                    "why",
                    "occurred_start",
                    "occurred_end",
                    "entities",
                    "causes",
                    "importance",
                ],
                "properties": {
                    "text": {"type": "string"},
                    "fact_type": {"type": "string", "enum": ["world", "experience"]},
                    "who": {"type": "array", "items": {"type": "string"}},
                    "what": {"type": "string"},
                    "where": _NULLABLE_STRING,
                    "when": _NULLABLE_STRING,
                    "why": _NULLABLE_STRING,
                    "occurred_start": _DATE,
                    "occurred_end": _DATE,
                    "entities": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "additionalProperties": False,
                            "required": ["name", "kind"],
                            "properties": {
                                "name": {"type": "string"},
                                "kind": {"type": "string", "enum": list(ENTITY_KINDS)},
                            },
                        },
                    },
                    "causes": {"type": "array", "items": {"type": "integer"}},
                    "importance": {"type": "integer", "minimum": 1, "maximum": 10},
                },
            },
        }
    },
}

SYSTEM_PROMPT = """\
You turn a piece of text into small facts for a long-term memory. Each fact will be read on \
its own, months later, without the original text, so every fact must stand alone.

For each fact:
- One statement: a single event, state, preference, plan or relationship. Split sentences \
that say several things.
- Self-contained: names instead of pronouns ("Maria moved to Lisbon", not "She moved there"). \
When the speaker is known, write their name instead of "I" or "we".
- Keep the details that matter (numbers, names, places, reasons, feelings, outcomes); leave \
out greetings, filler and mere questions. Never add what the text does not say or clearly imply.
- text: the fact as one plain sentence, including when it happened if that is known.
- fact_type: "experience" for what the speaker or author did, felt, decided or went through \
first-hand; "world" for everything else (other people, places, things, general knowledge).
- who: the people involved, by name. what: the event or state in a few words. where: the \
place, or null. when: the time expression as the text words it ("last Friday"), or null. \
why: the stated reason or purpose, or null.
- occurred_start / occurred_end: when it happened, as ISO 8601 dates or date-times, resolved \
against the date of the text given below. A one-day event starts and ends on that day; a \
period ("in 2019", "last week", "from May to July") runs from its first to its last day. \
Null for timeless facts and when the time cannot be worked out.
- entities: the named things the fact mentions, each with a kind: person, place, \
organization, product, title (a book, film, song, game or other work), event (a named \
occasion such as a wedding or a conference) or other.
- causes: the 0-based indexes, in your list, of other facts from this text that caused or \
led to this one ("Sam missed the train" causes "Sam was late for work"). Empty when none.
- importance: how much this fact matters months from now, 1 to 10: decisions, preferences, \
commitments, identity (name, job, home, family, health) and plans 7-10; background and \
ordinary events 4-6; small talk, pleasantries and passing remarks 1-3.

Answer with JSON only, shaped {"facts": [...]}. When the text holds nothing worth \
remembering, answer {"facts": []}."""


def _text_or_none(value: object) -> str | None:
    if value is None or isinstance(value, list | dict):
        return None
    text = str(value).strip()
    return text or None


def _text(value: object) -> str:
    return _text_or_none(value) or ""


def _names(value: object) -> list[str]:
    items = value if isinstance(value, list) else [value]
    return [name for name in (_text_or_none(item) for item in items) if name]


def _importance(value: object) -> float | None:
    """The model's 1-10, or None when it is missing or not a number (then the fact keeps
    the local cues' score, see engine/retain/staging.py)."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        return float(str(value).strip())
    except ValueError:
        return None


def _fact_type(value: object) -> Literal["world", "experience"]:
    return "experience" if str(value).strip().lower().startswith("exper") else "world"


def _kind(value: object) -> EntityKind:
    kind = str(value).strip().lower()
    for known in ENTITY_KINDS:
        if kind == known:
            return known
    return _KIND_ALIASES.get(kind, "other")


@dataclass(frozen=True)
class Moment:
    """A model-written date and the period it names ("2024-03" is a whole month)."""

    at: datetime
    precision: Precision

    def period_end(self) -> datetime:
        """The exclusive end of the named period, matching `engine.dates`' `[start, end)`."""
        at = self.at
        if self.precision == "day":
            return at + timedelta(days=1)
        if self.precision == "month":
            year, month = divmod(at.year * 12 + at.month, 12)
            return at.replace(year=year, month=month + 1, day=1)
        if self.precision == "year":
            return at.replace(year=at.year + 1, month=1, day=1)
        return at


def parse_moment(value: object) -> Moment | None:
    """Read a model-written date; None for absent or unreadable ones (the `when` text keeps
    the expression, so dropping an unreadable date loses nothing else)."""
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value < 9999:
        return Moment(datetime(value, 1, 1), "year")
    if not isinstance(value, str) or value.strip().lower() in _NO_DATE:
        return None
    text = value.strip()
    try:
        return Moment(datetime.combine(date.fromisoformat(text), time()), "day")
    except ValueError:
        pass
    try:
        return Moment(datetime.fromisoformat(text), "instant")
    except ValueError:
        pass
    for fmt, precision in _DATE_FORMATS:
        try:
            return Moment(datetime.strptime(text, fmt), precision)
        except ValueError:
            continue
    return None


def _causes(value: object) -> list[int]:
    items = value if isinstance(value, list) else []
    causes: list[int] = []
    for item in items:
        if isinstance(item, int) and not isinstance(item, bool):
            causes.append(item)
        elif isinstance(item, str) and item.strip().isdigit():
            causes.append(int(item))
    return causes


def _entities(value: object) -> list[dict[str, object]]:
    items = value if isinstance(value, list) else []
    entities: list[dict[str, object]] = []
    for item in items:
        entity = {"name": item} if isinstance(item, str) else item
        if isinstance(entity, dict) and _text_or_none(entity.get("name")):
            entities.append(entity)
    return entities


class _RawEntity(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: Annotated[str, BeforeValidator(_text)]
    kind: Annotated[EntityKind, BeforeValidator(_kind)] = "other"


class _RawFact(BaseModel):
    model_config = ConfigDict(extra="ignore")

    text: Annotated[str, BeforeValidator(_text)] = ""
    fact_type: Annotated[Literal["world", "experience"], BeforeValidator(_fact_type)] = "world"
    who: Annotated[list[str], BeforeValidator(_names)] = []
    what: Annotated[str, BeforeValidator(_text)] = ""
    where: Annotated[str | None, BeforeValidator(_text_or_none)] = None
    when: Annotated[str | None, BeforeValidator(_text_or_none)] = None
    why: Annotated[str | None, BeforeValidator(_text_or_none)] = None
    occurred_start: Annotated[Moment | None, BeforeValidator(parse_moment)] = None
    occurred_end: Annotated[Moment | None, BeforeValidator(parse_moment)] = None
    entities: Annotated[list[_RawEntity], BeforeValidator(_entities)] = []
    causes: Annotated[list[int], BeforeValidator(_causes)] = []
    importance: Annotated[float | None, BeforeValidator(_importance)] = None


class _InvalidOutput(Exception):
    """Why one model answer was unusable; becomes the re-ask reason."""


@dataclass(frozen=True)
class LLMExtraction:
    facts: list[ExtractedFact]
    usage: Usage
    attempts: int


def _fact_items(value: object) -> list[object]:
    """The list of facts, whether wrapped in {"facts": [...]} or not."""
    if isinstance(value, list):
        return value
    if not isinstance(value, dict):
        raise _InvalidOutput(f"the output is a JSON {type(value).__name__}, not an object")
    if isinstance(value.get("facts"), list):
        return list(value["facts"])
    if "text" in value:
        return [value]
    lists = [item for item in value.values() if isinstance(item, list)]
    if len(value) == 1 and len(lists) == 1:
        return list(lists[0])
    raise _InvalidOutput('the output has no "facts" list')


def _describe(exc: ValidationError) -> str:
    errors = exc.errors()[:_MAX_REASON_ERRORS]
    parts = [".".join(str(p) for p in error["loc"]) + ": " + error["msg"] for error in errors]
    return "; ".join(parts)


def _occurred(
    start: Moment | None, end: Moment | None, zone: tzinfo
) -> tuple[datetime | None, datetime | None]:
    """Half-open `[start, end)` like `engine.dates`: the model names inclusive days ("from
    the 4th to the 6th"), so a date-only end moves to the midnight after its period, and a
    date-only start without an end covers its own period. Naive values get the item's zone."""
    start, end = _in_zone(start, zone), _in_zone(end, zone)
    if start is not None and end is not None and end.at < start.at:
        start, end = end, start
    if start is None:
        return None, end.period_end() if end else None
    if end is None:
        return start.at, None if start.precision == "instant" else start.period_end()
    return start.at, end.period_end()


def _in_zone(moment: Moment | None, zone: tzinfo) -> Moment | None:
    if moment is None or moment.at.tzinfo is not None:
        return moment
    return Moment(moment.at.replace(tzinfo=zone), moment.precision)


def parse_facts(raw: str, item: ItemContext) -> list[ExtractedFact]:
    """Validate and repair one model answer; raises `_InvalidOutput` when it is unusable."""
    try:
        value = parse_json_lenient(raw)
    except LLMOutputError as exc:
        raise _InvalidOutput(str(exc)) from exc
    parsed: list[_RawFact] = []
    for index, entry in enumerate(_fact_items(value)):
        fact = {"text": entry} if isinstance(entry, str) else entry
        if not isinstance(fact, dict):
            raise _InvalidOutput(f"facts[{index}] is a {type(fact).__name__}, not an object")
        try:
            parsed.append(_RawFact.model_validate(fact))
        except ValidationError as exc:
            raise _InvalidOutput(f"facts[{index}] is invalid: {_describe(exc)}") from exc
    kept = {old: new for new, old in enumerate(i for i, f in enumerate(parsed) if f.text)}
    if parsed and not kept:
        raise _InvalidOutput("every fact has an empty text")
    zone = item.mentioned_at.tzinfo if item.mentioned_at and item.mentioned_at.tzinfo else UTC
    facts: list[ExtractedFact] = []
    for old, fact in enumerate(parsed):
        if old not in kept:
            continue
        start, end = _occurred(fact.occurred_start, fact.occurred_end, zone)
        causes = sorted({kept[c] for c in fact.causes if c in kept and c != old})
        entities: dict[str, ExtractedEntity] = {}
        for entity in fact.entities:
            entities.setdefault(entity.name.lower(), ExtractedEntity(entity.name, entity.kind))
        facts.append(
            ExtractedFact(
                text=fact.text,
                fact_type=fact.fact_type,
                who=fact.who,
                what=fact.what,
                where=fact.where,
                when=fact.when,
                why=fact.why,
                occurred_start=start,
                occurred_end=end,
                entities=list(entities.values()),
                causes=causes,
                importance=from_scale(fact.importance),
            )
        )
    return facts


def describe_day(moment: datetime) -> str:
    """`Tuesday, 5 March 2024`, spelled out so the model need not work out the weekday."""
    return f"{_WEEKDAYS[moment.weekday()]}, {moment.day} {_MONTHS[moment.month - 1]} {moment.year}"


def build_user_prompt(text: str, item: ItemContext) -> str:
    lines: list[str] = []
    if item.mentioned_at is not None:
        moment = item.mentioned_at
        yesterday = (moment - timedelta(days=1)).date().isoformat()
        lines.append(
            f"Today is {describe_day(moment)} ({moment.isoformat()}): the text was written "
            f'then, so "yesterday" means {yesterday} and "last year" means {moment.year - 1}.'
        )
    else:
        lines.append(
            "The text has no date. Give occurred dates only when the text states them in "
            "full; otherwise keep the time expression in `when` and leave the dates null."
        )
    if item.speaker:
        lines.append(f'Speaker: {item.speaker} ("I" and "me" refer to {item.speaker}).')
    if item.context:
        lines.append(f"Context: {item.context}")
    if item.metadata:
        pairs = "; ".join(f"{key}: {value}" for key, value in sorted(item.metadata.items()))
        lines.append(f"Metadata: {pairs}")
    lines += ["", "Text:", text]
    return "\n".join(lines)


class LLMExtractor:
    """Extracts facts from one chunk with an OpenAI-compatible model."""

    def __init__(self, client: LLMClient) -> None:
        self._client = client

    async def extract(self, text: str, item: ItemContext) -> list[ExtractedFact]:
        return (await self.extract_with_usage(text, item)).facts

    async def extract_with_usage(self, text: str, item: ItemContext) -> LLMExtraction:
        """Facts plus the tokens spent, summed over a re-ask if one was needed."""
        if not text.strip():
            return LLMExtraction([], Usage(), 0)
        user = build_user_prompt(text, item)
        first = await self._client.complete_raw(SYSTEM_PROMPT, user, SCHEMA_NAME, FACTS_SCHEMA)
        try:
            return LLMExtraction(_parse_answer(first, item), first.usage, 1)
        except _InvalidOutput as exc:
            reason = str(exc)
        retry_user = (
            f"{user}\n\nYour previous output was invalid because {reason}. Answer again with "
            'only the JSON object {"facts": [...]} described above.'
        )
        second = await self._client.complete_raw(
            SYSTEM_PROMPT, retry_user, SCHEMA_NAME, FACTS_SCHEMA
        )
        try:
            facts = _parse_answer(second, item)
        except _InvalidOutput as exc:
            raise ExtractionFailed(
                f"the LLM gave invalid facts twice: first {reason}; then {exc}"
            ) from exc
        return LLMExtraction(facts, first.usage + second.usage, 2)


def _parse_answer(result: ChatResult, item: ItemContext) -> list[ExtractedFact]:
    if not result.content:
        raise _InvalidOutput("the output was empty")
    try:
        return parse_facts(result.content, item)
    except _InvalidOutput as exc:
        if result.finish_reason == "length":
            raise _InvalidOutput(
                "the output was cut off at the token limit; give fewer, shorter facts"
            ) from exc
        raise
