"""Plain text as packing units: paragraphs and Markdown headings, and a paragraph too long
for a chunk as sentences (then words)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Final

from engine.chunking.units import Unit

_HEADING: Final = re.compile(r"#{1,6}(?:[ \t]|$)")
# A sentence ends after terminal punctuation (and closing quotes or brackets) followed by
# whitespace, or at a line break. Abbreviations ("e.g. this") end one too: harmless here,
# because sentences are only packing units, never shown alone.
# Latin terminators need a space after them ("3.5" is no end); Chinese ones (。！？；) do not,
# as Chinese puts no space between sentences.
_SENTENCE_END: Final = re.compile(r"[.!?…]+[\"'”’)\]]*(?=\s)|[。！？；]+[”’」』）]*|(?=\n)")
_WORD: Final = re.compile(r"\S+")


def plain_units(content: str, max_chars: int) -> list[Unit]:
    units: list[Unit] = []
    previous_end = 0
    for start, end, heading in _blocks(content):
        spans = (
            [(start, end)] if end - start <= max_chars else split(content, start, end, max_chars)
        )
        for piece_start, piece_end in spans:
            units.append(
                Unit(
                    text=content[piece_start:piece_end],
                    start=piece_start,
                    end=piece_end,
                    gap=content[previous_end:piece_start],
                    heading=heading,
                )
            )
            previous_end = piece_end
    return units


def _blocks(content: str) -> Iterator[tuple[int, int, bool]]:
    """Paragraphs and Markdown headings as (start, end, is_heading), trimmed of whitespace.

    Blank lines inside a fenced code block do not end its paragraph, and ``#`` lines there
    are not headings.
    """
    in_fence = False
    block: tuple[int, int] | None = None
    pos = 0
    for line in content.splitlines(keepends=True):
        line_start = pos
        pos += len(line)
        stripped = line.strip()
        if not stripped and not in_fence:
            if block is not None:
                yield block[0], block[1], False
                block = None
            continue
        first = line_start + len(line) - len(line.lstrip())
        last = line_start + len(line.rstrip())
        if not in_fence and _HEADING.match(stripped):
            if block is not None:
                yield block[0], block[1], False
                block = None
            yield first, last, True
            continue
        if stripped.startswith(("```", "~~~")):
            in_fence = not in_fence
        if block is None:
            block = (first, last)
        elif stripped:
            block = (block[0], last)
    if block is not None:
        yield block[0], block[1], False


def split(text: str, start: int, end: int, budget: int) -> list[tuple[int, int]]:
    """Spans of `text[start:end]` no longer than `budget`: sentences, else words, else slices."""
    spans: list[tuple[int, int]] = []
    for sentence_start, sentence_end in _sentences(text, start, end):
        if sentence_end - sentence_start <= budget:
            spans.append((sentence_start, sentence_end))
        else:
            spans.extend(_wrap(text, sentence_start, sentence_end, budget))
    return spans


def _sentences(text: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    cursor = start
    boundaries = [match.end() for match in _SENTENCE_END.finditer(text, start, end)]
    for boundary in [*boundaries, end]:
        span = trim(text, cursor, boundary)
        if span is not None:
            yield span
        cursor = boundary


def _wrap(text: str, start: int, end: int, budget: int) -> list[tuple[int, int]]:
    """Greedy word wrap; a single word longer than `budget` is cut, the only cut in a word."""
    spans: list[tuple[int, int]] = []
    line: tuple[int, int] | None = None
    for match in _WORD.finditer(text, start, end):
        word_start, word_end = match.span()
        if line is not None and word_end - line[0] <= budget:
            line = (line[0], word_end)
            continue
        if line is not None:
            spans.append(line)
        while word_end - word_start > budget:
            spans.append((word_start, word_start + budget))
            word_start += budget
        line = (word_start, word_end)
    if line is not None:
        spans.append(line)
    return spans


def trim(text: str, start: int, end: int) -> tuple[int, int] | None:
    piece = text[start:end]
    stripped = piece.strip()
    if not stripped:
        return None
    first = start + len(piece) - len(piece.lstrip())
    return first, first + len(stripped)
