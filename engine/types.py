"""Typed records shared across the engine, activities and workflows.

They are plain dataclasses so they travel as Temporal payloads unchanged; add fields with
defaults only, so running workflows keep decoding old payloads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

FactType = Literal["world", "experience", "observation"]
EntityKind = Literal["person", "place", "organization", "product", "title", "event", "other"]


@dataclass(frozen=True)
class ItemContext:
    """What the extractor knows about the item a chunk came from."""

    mentioned_at: datetime | None  # the item timestamp; None when the caller sent "unset"
    context: str = ""
    speaker: str | None = None  # set by conversation-aware chunking when a turn names one
    # The item's metadata as the caller sent it (Hindsight shows it to the extractor too).
    metadata: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ExtractedEntity:
    name: str
    kind: EntityKind = "other"


@dataclass(frozen=True)
class ExtractedFact:
    """One small self-contained fact, as an extractor returns it (before storage)."""

    text: str
    fact_type: Literal["world", "experience"] = "world"
    who: list[str] = field(default_factory=list)
    what: str = ""
    where: str | None = None
    when: str | None = None  # the time expression as written, e.g. "last week"
    why: str | None = None
    occurred_start: datetime | None = None
    occurred_end: datetime | None = None
    entities: list[ExtractedEntity] = field(default_factory=list)
    source_start: int | None = None  # character span in the chunk text, when known
    source_end: int | None = None
    causes: list[int] = field(default_factory=list)  # indexes of facts (same chunk) causing this
    importance: float | None = None  # [0, 1]; None: scored from the text at staging
