"""Tokenisation for the keyword (BM25) index, shared by retain and recall.

Retain stores `term_frequencies(fact_text)` per fact; recall scores `tokenize(query)`. Both
sides must produce identical terms, so every normalisation lives here and nowhere else:
changing anything in this module changes the index, and stored facts need re-tokenising
(bump `TERMS_VERSION`; `engram retokenize` rewrites them).

Pipeline: NFKC, casefold, split on anything that is not a letter, digit or combining mark
(an apostrophe inside a word is kept until the clitics 's 'll 're 've 'd 'm are dropped, then
the rest are removed: "Anna's" -> "anna", "she'd" -> "she", "don't" -> "dont").
Then per word:
  * runs of CJK ideographs, kana and hangul become overlapping character bigrams (a lone
    character stays a unigram), because those scripts do not separate words with spaces;
    Chinese runs are folded to Simplified characters and cut into jieba words, each followed
    by its characters (`CJK_MODE`);
  * ASCII-letter words drop English stop words and go through the Snowball English stemmer;
  * everything else (digits, accented or Cyrillic words, "gpt4") is kept as written.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections import Counter
from functools import lru_cache
from typing import Final, Literal

import Stemmer

from engine.chinese import HAN_RUN_RE, default_segmenter

# Longer tokens are truncated, never dropped: the same text truncates the same way at retain
# and at query time, and `memory_terms.term` sits in a btree key, which has a size limit.
MAX_TOKEN_CHARS: Final = 64

STOP_WORDS: Final = frozenset(
    # Function words and question words: they carry no topic, and dropping them keeps
    # document lengths about content. Words that are also common names or nouns ("will",
    # "may", "us", "can") are deliberately absent.
    (
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "been",
        "being",
        "but",
        "by",
        "for",
        "from",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "such",
        "than",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "to",
        "was",
        "were",
        "with",
        "i",
        "me",
        "my",
        "we",
        "our",
        "you",
        "your",
        "he",
        "him",
        "his",
        "she",
        "her",
        "am",
        "do",
        "does",
        "did",
        "have",
        "has",
        "had",
        "what",
        "which",
        "who",
        "whom",
        "when",
        "where",
        "why",
        "how",
        "not",
        "no",
        "so",
        "too",
        "very",
        "just",
        "also",
        "about",
    )
)

# Ideographs (with extension A, compatibility ideographs and the supplementary planes),
# the iteration mark and ideographic zero, kana, hangul jamo and syllables. NFKC has already
# folded half-width katakana and hangul to their full-width forms.
_CJK_CLASS: Final = (
    "\u1100-\u11ff"  # hangul jamo
    "\u3005\u3007"  # 々 〇
    "\u3040-\u30ff"  # hiragana, katakana (with ー)
    "\u3130-\u318f"  # hangul compatibility jamo
    "\u31f0-\u31ff"  # katakana phonetic extensions
    "\u3400-\u4dbf"  # CJK extension A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\ua960-\ua97f"  # hangul jamo extended A
    "\uac00-\ud7ff"  # hangul syllables and jamo extended B
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\U00020000-\U0003ffff"  # CJK extensions B and later
)


def _combining_mark_class() -> str:
    """Regex ranges of all combining marks (Mn, Mc, Me) in the Basic Multilingual Plane.

    Python's `\\w` excludes them, which would cut Devanagari, Thai or Arabic words apart at
    every vowel sign; computed once at import (~8 ms) rather than hand-listed.
    """
    marks = [cp for cp in range(0x10000) if unicodedata.category(chr(cp))[0] == "M"]
    ranges: list[str] = []
    start = previous = marks[0]
    for cp in [*marks[1:], -1]:
        if cp != previous + 1:
            ranges.append(f"\\u{start:04x}-\\u{previous:04x}")
            start = cp
        previous = cp
    return "".join(ranges)


_MARKS: Final = _combining_mark_class()
# A word: a letter or digit, then letters, digits or combining marks, optionally joined by
# apostrophes. Underscores are replaced by spaces beforehand so `\w` means letters and digits.
_WORD_RE: Final = re.compile(rf"\w[\w{_MARKS}]*(?:['’]\w[\w{_MARKS}]*)*")
_CJK_RUN_RE: Final = re.compile(f"[{_CJK_CLASS}]+")
_APOSTROPHES_RE: Final = re.compile("['’]")
# English clitics are dropped rather than joined, else "she'd" -> "shed", "we'll" -> "well".
_CLITIC_RE: Final = re.compile("['’](?:s|ll|re|ve|d|m)$")
_ASCII_WORD_RE: Final = re.compile("[a-z]+")


CjkMode = Literal["bigrams", "words", "both", "words+chars"]
# Chinese index terms: jieba words, each followed by its characters ("家猫" -> 家猫 家 猫, so
# "猫" finds it). Measured on bench/zh_retrieval.py (in-process BM25 over the raw turns,
# recall@10, 32 questions): bigrams 0.651, both (words + bigrams) 0.682, words 0.771,
# words+chars 0.870; details in docs/benchmarks.md.
CJK_MODE: Final[CjkMode] = "words+chars"

# Which tokeniser wrote a memory's stored terms (`memory_units.terms_version`; the column's
# default is this number, so every insert path writes it without naming it). Bump it, with a
# migration that moves the default, whenever `tokenize` changes its output for some text;
# `engram retokenize` (engine/retokenize.py) then rewrites the older postings.
#   0  before migration 0024: Chinese as character bigrams (or an earlier words mode)
#   1  Chinese as jieba words and their characters (`CJK_MODE`), Snowball 2.2 English stems
TERMS_VERSION: Final = 1


def tokenize(text: str) -> list[str]:
    """Index terms of `text`, in order, with repeats (term frequency is their count)."""
    return tokenize_with(text, CJK_MODE)


def tokenize_with(text: str, cjk: CjkMode) -> list[str]:
    """`tokenize` with a chosen treatment of Chinese runs (for measuring the choice)."""
    normalised = unicodedata.normalize("NFKC", text).casefold().replace("_", " ")
    tokens: list[str] = []
    for match in _WORD_RE.finditer(normalised):
        word = match.group()
        if "'" in word or "’" in word:
            word = _APOSTROPHES_RE.sub("", _CLITIC_RE.sub("", word))
        if word.isascii():
            _add_word(word, tokens)
            continue
        position = 0
        for run in _CJK_RUN_RE.finditer(word):
            if run.start() > position:
                _add_word(word[position : run.start()], tokens)
            _add_cjk_run(run.group(), tokens, cjk)
            position = run.end()
        if position < len(word):
            _add_word(word[position:], tokens)
    return tokens


def term_frequencies(text: str) -> tuple[dict[str, int], int]:
    """Term -> frequency for one document, and its length in tokens (stop words excluded)."""
    tokens = tokenize(text)
    return dict(Counter(tokens)), len(tokens)


def _add_word(word: str, tokens: list[str]) -> None:
    if _ASCII_WORD_RE.fullmatch(word):
        if word in STOP_WORDS:
            return
        word = stem(word)
    tokens.append(word[:MAX_TOKEN_CHARS])


def _add_cjk_run(run: str, tokens: list[str], cjk: CjkMode) -> None:
    """Bigrams for kana and hangul; for Chinese (Traditional folded to Simplified, so 臺灣
    matches 台湾) bigrams, jieba words, both, or words with their characters. Single-character
    words are left to the bigrams in "both": they are mostly particles (的, 了, 在)."""
    han = HAN_RUN_RE.fullmatch(run) is not None
    if han:
        run = default_segmenter().simplified(run)
    if len(run) == 1:
        tokens.append(run)
        return
    if not han or cjk in ("bigrams", "both"):
        tokens.extend(run[i : i + 2] for i in range(len(run) - 1))
    if not han or cjk == "bigrams":
        return
    for word in default_segmenter().words(run):
        if len(word) == 1:
            if cjk != "both":
                tokens.append(word)
            continue
        tokens.append(word)
        if cjk == "words+chars":
            tokens.extend(word)


# English stems come from Snowball's English (Porter2) algorithm as PyStemmer 2.2 implements
# it (Snowball 2.2). It gives the same stems as the Porter2 stemmer this module used to carry
# on all 11,577 distinct words of LoCoMo, so terms stored before the switch still match.
# Snowball 3.0 (PyStemmer 3.x) changes 15 of them ("organization" -> "organiz", not "organ"),
# so moving to it needs the stored terms re-tokenised first.
# PyStemmer's objects are not thread-safe (recall tokenises in a thread pool): one per thread.
_STEMMERS: Final = threading.local()


@lru_cache(maxsize=1 << 16)
def stem(word: str) -> str:
    """English Snowball stem of a lowercase ASCII word; memoised because chat repeats words."""
    stemmer = getattr(_STEMMERS, "english", None)
    if stemmer is None:
        stemmer = _STEMMERS.english = Stemmer.Stemmer("english")
    return str(stemmer.stemWord(word))
