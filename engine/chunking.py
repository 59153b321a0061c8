"""Split retained content into chunks whose ids survive local edits.

Retain re-extracts facts only for chunks whose id or hash is new, so two properties matter:

* Ids are content-addressed: ``c_`` + the first 16 hex digits of sha256(document id, chunk
  text), with ``_2``, ``_3`` ... for repeats of the same text in one document. Inserting a
  paragraph does not shift the ids of the chunks after it, as ``f"{doc}:{index}"`` would.
* Packing is content-defined. Content is cut into units (a paragraph, a heading, a
  conversation turn, or a sentence of one that is too long); a chunk ends after a unit
  picked by hashes of the units near it (`_cuts`), and a run still too long is split after
  its lowest-scoring unit (`_fit`). Greedy packing from the start re-flows every later
  chunk once an edit changes a chunk's size; here an edit moves only the cuts near it.

  Measured (generated prose: 40-paragraph documents, paragraphs ~250 chars with some
  one-liners and some ~1,000-char ones, 2,000 random edits, ``max_chars=3000``): an edit
  that rewrites, grows, inserts or deletes one paragraph changes a mean of 1.0-1.4 chunk
  ids, and more than 2 in at most 1.5% of edits; greedy packing changes a mean of 1.9-2.1,
  and more than 2 in 28-35%. A same-length word swap changes ~1 id either way. More than 2
  happens when the edit adds or removes a cut next to a run that must then be re-split,
  or when a paragraph grows past ``max_chars`` and becomes sentences.

  The price is smaller chunks, so more extraction calls: chunks average 52% of
  ``max_chars`` (8.6 per document above) where greedy packing fills 80% (5.5). Raising
  ``_TARGET_SHARE`` and ``_MIN_SHARE`` to 0.6 / 0.3 fills 58% but changes more than 2 ids
  in up to 3% of edits (7% at ``max_chars=1000``): long runs must be split more often.

Plain text keeps its exact characters: ``content[chunk.char_start:chunk.char_end] ==
chunk.text``. Conversations are rendered as ``Speaker: text`` lines, so there the span is the
source the chunk came from (the JSON objects, or the transcript lines), not the text itself.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final

from engine.errors import InvalidInput

MIN_MAX_CHARS: Final = 200

# As shares of max_chars: the characters per hash boundary on average (`_cuts`), and the
# least a chunk holds unless the content runs out (`_cuts`, `_fit`). See the module docstring.
_TARGET_SHARE: Final = 0.4
_MIN_SHARE: Final = 0.25

_SPEAKER_KEYS: Final = ("speaker", "name", "role")  # "name" is more specific than "role"
_TEXT_KEYS: Final = ("content", "text", "message")
_ROLE_NAMES: Final = frozenset({"user", "assistant", "system", "human", "ai", "bot", "agent"})
_MAX_SPEAKER_CHARS: Final = 80
_MAX_NAME_CHARS: Final = 40
_JSON_WS: Final = " \t\n\r"

_TRANSCRIPT_LINE: Final = re.compile(
    r"[ \t]*(?P<name>[^\W\d_][\w.'’\-]*(?: [\w.'’\-]+){0,3})[ \t]*:[ \t]+(?P<text>\S)"
)
_HEADING: Final = re.compile(r"#{1,6}(?:[ \t]|$)")
# A sentence ends after terminal punctuation (and closing quotes or brackets) followed by
# whitespace, or at a line break. Abbreviations ("e.g. this") end one too: harmless here,
# because sentences are only packing units, never shown alone.
# Latin terminators need a space after them ("3.5" is no end); Chinese ones (。！？；) do not,
# as Chinese puts no space between sentences.
_SENTENCE_END: Final = re.compile(r"[.!?…]+[\"'”’)\]]*(?=\s)|[。！？；]+[”’」』）]*|(?=\n)")
_WORD: Final = re.compile(r"\S+")


@dataclass(frozen=True)
class Chunk:
    """One piece of retained content, the unit of fact extraction."""

    chunk_id: str
    index: int
    text: str
    content_hash: str
    char_start: int  # span in the original content (see the module docstring)
    char_end: int
    speaker: str | None = None  # set when every turn in the chunk has this one speaker


@dataclass(frozen=True)
class _Unit:
    """The smallest piece packing moves; never split across chunks."""

    text: str
    start: int  # source span in the original content
    end: int
    gap: str  # what joins it to the previous unit of the same chunk
    heading: bool = False
    speaker: str | None = None


@dataclass(frozen=True)
class _Turn:
    speaker: str | None
    text: str
    start: int  # span of the turn's source
    end: int
    text_start: int | None  # where `text` sits in the content, when it is verbatim


def chunk_content(document_id: str, content: str, max_chars: int = 3000) -> list[Chunk]:
    """Split `content` into chunks of at most `max_chars` characters, conversation-aware."""
    if max_chars < MIN_MAX_CHARS:
        raise InvalidInput("chunk_size", f"must be at least {MIN_MAX_CHARS}, got {max_chars}")
    if not content.strip():
        return []
    turns = _json_turns(content)
    if turns is None:
        turns = _jsonl_turns(content)
    if turns is None:
        turns = _transcript_turns(content)
    units = _plain_units(content, max_chars) if turns is None else _turn_units(turns, max_chars)
    return _build_chunks(document_id, _pack(units, max_chars), conversation=turns is not None)


def _pack(units: Sequence[_Unit], max_chars: int) -> list[list[_Unit]]:
    """Group units into chunks: cut where `_cuts` says, then split each run that is still
    too long with `_fit`."""
    scores = [_cut_score(units, i) for i in range(len(units))]
    # Where each unit sits in the text of a chunk, counted from the first unit, so that
    # the length of any run of units is ends[last] - starts[first].
    starts: list[int] = []
    ends: list[int] = []
    position = 0
    for unit in units:
        position += len(unit.gap) if starts else 0
        starts.append(position)
        position += len(unit.text)
        ends.append(position)
    groups: list[list[_Unit]] = []
    run_start = 0
    for i, cut in enumerate(_cuts(units, scores, max_chars)):
        if cut or i == len(units) - 1:
            for lo, hi in _fit(scores, starts, ends, run_start, i + 1, max_chars):
                groups.append(list(units[lo:hi]))
            run_start = i + 1
    return groups


def _cut_score(units: Sequence[_Unit], i: int) -> float:
    """How readily a chunk ends after unit `i`, lower first: a unit's hash draw divided by
    its length, 0 before a heading, infinite after one (a heading belongs with its text)."""
    unit = units[i]
    if unit.heading:
        return math.inf
    if i + 1 < len(units) and units[i + 1].heading:
        return 0.0
    digest = hashlib.sha256(unit.text.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 / len(unit.text)


def _cuts(units: Sequence[_Unit], scores: Sequence[float], max_chars: int) -> list[bool]:
    """Whether a chunk ends after each unit, decided from nearby units only.

    A unit is a boundary when its score is below ``1 / target``: its hash draw falls below
    ``len(unit) / target``, so boundaries come about once per `target` characters whatever
    the unit sizes. A boundary becomes a cut when at least `min_chars` lie since the
    previous boundary. That reference is the previous boundary, not the previous cut, so
    the decision never chains back through the document: an edit can only move the cuts
    at the edited unit and at the next boundary. The unit before a heading is always a
    boundary, so a heading starts a chunk unless too little text precedes it.
    """
    min_chars = max_chars * _MIN_SHARE
    target = max_chars * _TARGET_SHARE
    cuts: list[bool] = []
    since_boundary = 0
    for unit, score in zip(units, scores, strict=True):
        since_boundary += len(unit.text) + (len(unit.gap) if since_boundary else 0)
        boundary = score * target < 1
        cuts.append(boundary and since_boundary >= min_chars)
        if boundary:
            since_boundary = 0
    return cuts


def _fit(
    scores: Sequence[float],
    starts: Sequence[int],
    ends: Sequence[int],
    lo: int,
    hi: int,
    max_chars: int,
) -> list[tuple[int, int]]:
    """Split units[lo:hi] into runs that fit, each time after the lowest-scoring unit that
    leaves `min_chars` on both sides (any unit, if none does).

    Cutting where the next unit would not fit makes every later cut depend on where the
    run started, so an edit would re-flow the rest of the run; the lowest score depends on
    the units' own hashes, so the same split points survive edits elsewhere in the run.
    """
    min_chars = max_chars * _MIN_SHARE
    done: list[tuple[int, int]] = []
    pending = [(lo, hi)]
    while pending:  # depth-first, left part first, so runs come out in document order
        first, stop = pending.pop()
        if ends[stop - 1] - starts[first] <= max_chars:
            done.append((first, stop))
            continue
        candidates = range(first, stop - 1)
        balanced = [
            i
            for i in candidates
            if ends[i] - starts[first] >= min_chars and ends[stop - 1] - starts[i + 1] >= min_chars
        ]
        # Ties only come from repeated texts; the middle one keeps the splitting O(n log n).
        middle = (first + stop) / 2
        best = min(balanced or candidates, key=lambda i: (scores[i], abs(i - middle)))
        pending += [(best + 1, stop), (first, best + 1)]
    return done


def _build_chunks(document_id: str, groups: list[list[_Unit]], conversation: bool) -> list[Chunk]:
    chunks: list[Chunk] = []
    seen: dict[str, int] = {}
    prefix = document_id.encode("utf-8", "surrogatepass")
    for index, group in enumerate(groups):
        text = group[0].text + "".join(unit.gap + unit.text for unit in group[1:])
        raw = text.encode("utf-8", "surrogatepass")
        # Length-prefixed so ("ab", "c") and ("a", "bc") cannot collide.
        keyed = hashlib.sha256(len(prefix).to_bytes(8, "big") + prefix + raw).hexdigest()
        base = f"c_{keyed[:16]}"
        count = seen.get(base, 0) + 1
        seen[base] = count
        speakers = {unit.speaker for unit in group}
        speaker = speakers.pop() if conversation and len(speakers) == 1 else None
        chunks.append(
            Chunk(
                chunk_id=base if count == 1 else f"{base}_{count}",
                index=index,
                text=text,
                content_hash=hashlib.sha256(raw).hexdigest(),
                char_start=group[0].start,
                char_end=group[-1].end,
                speaker=speaker,
            )
        )
    return chunks


# --- plain text ---------------------------------------------------------------------------


def _plain_units(content: str, max_chars: int) -> list[_Unit]:
    units: list[_Unit] = []
    previous_end = 0
    for start, end, heading in _blocks(content):
        spans = (
            [(start, end)] if end - start <= max_chars else _split(content, start, end, max_chars)
        )
        for piece_start, piece_end in spans:
            units.append(
                _Unit(
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


def _split(text: str, start: int, end: int, budget: int) -> list[tuple[int, int]]:
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
        span = _trim(text, cursor, boundary)
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


def _trim(text: str, start: int, end: int) -> tuple[int, int] | None:
    piece = text[start:end]
    stripped = piece.strip()
    if not stripped:
        return None
    first = start + len(piece) - len(piece.lstrip())
    return first, first + len(stripped)


# --- conversations ------------------------------------------------------------------------


def _turn_units(turns: Sequence[_Turn], max_chars: int) -> list[_Unit]:
    """One unit per turn, rendered ``Speaker: text``; a turn too long for a chunk is split
    by sentences and every piece repeats the speaker, so each line stays attributed."""
    units: list[_Unit] = []
    for turn in turns:
        prefix = f"{turn.speaker}: " if turn.speaker else ""
        if len(prefix) + len(turn.text) <= max_chars:
            units.append(
                _Unit(prefix + turn.text, turn.start, turn.end, "\n", speaker=turn.speaker)
            )
            continue
        for number, (start, end) in enumerate(
            _split(turn.text, 0, len(turn.text), max_chars - len(prefix))
        ):
            if turn.text_start is None:
                span = (turn.start, turn.end)
            else:
                first = turn.start if number == 0 else turn.text_start + start
                span = (first, turn.text_start + end)
            text = prefix + turn.text[start:end]
            units.append(_Unit(text, span[0], span[1], "\n", speaker=turn.speaker))
    return units


def _json_turns(content: str) -> list[_Turn] | None:
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


def _jsonl_turns(content: str) -> list[_Turn] | None:
    """Turns of JSON Lines, one turn object a line."""
    if not content.lstrip(_JSON_WS).startswith("{"):
        return None
    items: list[tuple[Any, int, int]] = []
    pos = 0
    for line in content.split("\n"):
        span = _trim(content, pos, pos + len(line))
        pos += len(line) + 1
        if span is None:
            continue
        try:
            value = json.loads(content[span[0] : span[1]])
        except (ValueError, RecursionError):
            return None
        items.append((value, span[0], span[1]))
    return _turns_from_objects(items)


def _turns_from_objects(items: Sequence[tuple[Any, int, int]]) -> list[_Turn] | None:
    """Turns, if every object is turn-shaped and at least one names a speaker and says
    something; objects without text (e.g. a tool call with ``"content": null``) are skipped."""
    turns: list[_Turn] = []
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
            turns.append(_Turn(speaker, text.strip(), start, end, None))
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


def _transcript_turns(content: str) -> list[_Turn] | None:
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
        span = _trim(content, line_start, pos)
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
        _Turn(name, content[text_start:end], start, end, text_start)
        for start, end, name, text_start in spans
    ]


def _skip_ws(text: str, i: int) -> int:
    while i < len(text) and text[i] in _JSON_WS:
        i += 1
    return i
