"""Chinese text: word segmentation with part-of-speech tags, and Traditional → Simplified
folding for matching.

jieba keeps its dictionary on a `Tokenizer` object; the module-level `jieba.cut` and
`jieba.add_word` use (and mutate) a process-wide default one. Engram never touches that: one
read-only `ChineseSegmenter` wraps its own `Tokenizer`, and the names a bank already knows are
honoured by cutting them out of the text before segmentation (`BankSegmenter`), not by adding
them to the shared dictionary — so two banks never see each other's names.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from typing import Final

import jieba
import jieba.posseg
import opencc

# Ideographs only (no kana or hangul): the characters jieba and OpenCC are about.
HAN_CLASS: Final = "\u3007\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003ffff"
HAN_RE: Final = re.compile(f"[{HAN_CLASS}]")
HAN_RUN_RE: Final = re.compile(f"[{HAN_CLASS}]+")


@dataclass(frozen=True)
class Word:
    """A segment of the text and jieba's part-of-speech tag (ICTCLAS tag set: nr person,
    ns place, nt organisation, nz other proper noun, eng Latin word, m numeral, x symbol)."""

    text: str
    tag: str
    start: int


def has_han(text: str) -> bool:
    return HAN_RE.search(text) is not None


class ChineseSegmenter:
    """jieba with its own dictionary, plus OpenCC's Traditional → Simplified table.

    Building one costs ~0.5 s (jieba's prefix dictionary, read from its pickled cache) and
    ~60 MB; use `default_segmenter()` rather than building one per call."""

    def __init__(self) -> None:
        self._tokenizer = jieba.Tokenizer()
        self._tokenizer.initialize()  # now, not inside the first request that segments
        self._tagger = jieba.posseg.POSTokenizer(self._tokenizer)
        self._t2s = opencc.OpenCC("t2s")

    def simplified(self, text: str) -> str:
        """Traditional characters folded to Simplified (same length for the common cases,
        but callers keep the original text: this is for matching only)."""
        return str(self._t2s.convert(text)) if has_han(text) else text

    def words(self, text: str) -> list[str]:
        """Words of `text` (no tags), for the keyword index."""
        return [w for w in self._tokenizer.cut(text, HMM=True) if w.strip()]

    def tagged(self, text: str) -> list[Word]:
        words: list[Word] = []
        position = 0
        for pair in self._tagger.cut(text):
            word, tag = str(pair.word), str(pair.flag)
            start = text.find(word, position)
            if start < 0:
                start = position
            words.append(Word(word, tag, start))
            position = start + len(word)
        return words

    def for_bank(self, names: Iterable[str]) -> BankSegmenter:
        return BankSegmenter(self, frozenset(n for n in names if has_han(n)))


class BankSegmenter:
    """A segmenter that keeps a bank's known Chinese names whole: "林晓雯" once extracted is
    one word next time even where jieba's dictionary would split it."""

    def __init__(self, base: ChineseSegmenter, names: frozenset[str]) -> None:
        self._base = base
        self._names = names
        # Longest first, so "林晓雯" wins over "林晓" at the same position.
        self._pattern = (
            re.compile("|".join(re.escape(n) for n in sorted(names, key=len, reverse=True)))
            if names
            else None
        )

    def tagged(self, text: str) -> list[Word]:
        if self._pattern is None:
            return self._base.tagged(text)
        words: list[Word] = []
        for start, end, known in _pieces(text, self._pattern):
            if known:
                words.append(Word(text[start:end], "nr", start))
                continue
            words += [
                Word(w.text, w.tag, start + w.start) for w in self._base.tagged(text[start:end])
            ]
        return words


def _pieces(text: str, pattern: re.Pattern[str]) -> Iterator[tuple[int, int, bool]]:
    cursor = 0
    for m in pattern.finditer(text):
        if m.start() > cursor:
            yield cursor, m.start(), False
        yield m.start(), m.end(), True
        cursor = m.end()
    if cursor < len(text):
        yield cursor, len(text), False


_BUILDING: Final = threading.Lock()


def default_segmenter() -> ChineseSegmenter:
    """The process's one segmenter, built on first use (read-only after that); the lock keeps
    two threads that segment at once from loading the dictionary twice."""
    with _BUILDING:
        return _built()


@cache
def _built() -> ChineseSegmenter:
    return ChineseSegmenter()
