"""What chunking is made of: the chunks it returns, the units packing moves and the turns a
conversation is read as."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Chunk:
    """One piece of retained content, the unit of fact extraction."""

    chunk_id: str
    index: int
    text: str
    content_hash: str
    char_start: int  # span in the original content (see engine/chunking/__init__.py)
    char_end: int
    speaker: str | None = None  # set when every turn in the chunk has this one speaker


@dataclass(frozen=True)
class Unit:
    """The smallest piece packing moves; never split across chunks."""

    text: str
    start: int  # source span in the original content
    end: int
    gap: str  # what joins it to the previous unit of the same chunk
    heading: bool = False
    speaker: str | None = None


@dataclass(frozen=True)
class Turn:
    speaker: str | None
    text: str
    start: int  # span of the turn's source
    end: int
    text_start: int | None  # where `text` sits in the content, when it is verbatim
