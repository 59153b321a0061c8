"""What the import parsers produce, and the limits that keep each document's payloads small.

An import's records (messages, turns, files) become documents of retain items. Documents
reach the workflows one at a time from the staging tables, so only a document's own
content ever travels in a Temporal payload; these limits keep that well under 2 MB (the
retain workflow carries a document's items and its new chunks, so about twice its size).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Final, Literal

from engine.retain.payloads import RetainItem

ImportFormat = Literal["jsonl", "chatgpt", "locomo", "text"]
OnError = Literal["skip", "stop"]
FORMATS: Final = ("jsonl", "chatgpt", "locomo", "text")

# A document larger than this is split at item boundaries into parts "<id>#2", "<id>#3"...;
# parts stay stable when an export grows at the end, so re-imports still add only the new.
MAX_DOCUMENT_CHARS: Final = 400_000
# An item (a day of messages, a session, a file) larger than this is cut at paragraph or
# line boundaries first.
MAX_ITEM_CHARS: Final = 100_000
# Record errors kept verbatim for the report; beyond this only their number is kept.
MAX_REPORTED_ERRORS: Final = 100


@dataclass(frozen=True)
class SourceFile:
    """One uploaded file: `name` is its path relative to what the user named ("" if none)."""

    name: str
    content: str


@dataclass(frozen=True)
class ImportOptions:
    format: ImportFormat | None = None  # None: detected per file
    on_error: OnError = "skip"
    user_name: str = "User"  # the speaker for role "user" (ChatGPT, JSONL with roles)
    assistant_name: str = "Assistant"


@dataclass(frozen=True)
class RecordError:
    """A record that could not be imported, where it is and why."""

    position: str  # e.g. "chat.jsonl line 17", "conversations.json conversation 3"
    message: str

    def __str__(self) -> str:
        return f"{self.position}: {self.message}"


@dataclass(frozen=True)
class ImportDocument:
    document_id: str
    items: list[RetainItem]
    records: int  # messages, turns or files it holds: the "items" a user counts

    @property
    def chars(self) -> int:
        return sum(len(item.content) for item in self.items)


@dataclass(frozen=True)
class ParsedImport:
    formats: list[str]  # the format of each file, in order, deduplicated
    documents: list[ImportDocument]
    errors: list[RecordError] = field(default_factory=list)

    @property
    def records(self) -> int:
        return sum(d.records for d in self.documents)


def fallback_document_id(source: SourceFile, first_record: str) -> str:
    """The id of a document the data does not name: the file's name, else a hash of the
    first record (stable when the file grows at the end)."""
    if source.name:
        return source.name
    return "import-" + hashlib.sha256(first_record.encode()).hexdigest()[:16]
