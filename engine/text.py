"""Tokenisation for the keyword (BM25) index, shared by retain and recall.

Retain stores `term_frequencies(fact_text)` per fact; recall scores `tokenize(query)`. Both
sides must produce identical terms, so every normalisation lives here and nowhere else:
changing anything in this module changes the index, and stored facts need re-tokenising.

Pipeline: NFKC, casefold, split on anything that is not a letter, digit or combining mark
(an apostrophe inside a word is kept until the clitics 's 'll 're 've 'd 'm are dropped, then
the rest are removed: "Anna's" -> "anna", "she'd" -> "she", "don't" -> "dont").
Then per word:
  * runs of CJK ideographs, kana and hangul become overlapping character bigrams (a lone
    character stays a unigram), because those scripts do not separate words with spaces;
  * ASCII-letter words drop English stop words and go through the Porter2 stemmer;
  * everything else (digits, accented or Cyrillic words, "gpt4") is kept as written.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Mapping
from functools import lru_cache
from types import MappingProxyType
from typing import Final

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


def tokenize(text: str) -> list[str]:
    """Index terms of `text`, in order, with repeats (term frequency is their count)."""
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
            _add_cjk_run(run.group(), tokens)
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


def _add_cjk_run(run: str, tokens: list[str]) -> None:
    if len(run) == 1:
        tokens.append(run)
        return
    tokens.extend(run[i : i + 2] for i in range(len(run) - 1))


# --- Porter2 (Snowball English) stemmer ---------------------------------------------------
#
# Implemented from the published algorithm description. Words are lowercase ASCII; a "Y"
# marks a y that acts as a consonant. R1 is the region after the first non-vowel that follows
# a vowel (or the empty end of the word); R2 is the same rule applied inside R1. A suffix is
# "in R1" when it starts at or after R1's start. Each step removes the LONGEST matching suffix
# from its list; when that suffix's condition fails the step does nothing (no fallback to a
# shorter suffix).

_VOWELS: Final = frozenset("aeiouy")
_DOUBLES: Final = ("bb", "dd", "ff", "gg", "mm", "nn", "pp", "rr", "tt")
_LI_ENDINGS: Final = frozenset("cdeghkmnrt")
_R1_PREFIXES: Final = ("gener", "commun", "arsen")

_EXCEPTIONS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "skis": "ski",
        "skies": "sky",
        "dying": "die",
        "lying": "lie",
        "tying": "tie",
        "idly": "idl",
        "gently": "gentl",
        "ugly": "ugli",
        "early": "earli",
        "only": "onli",
        "singly": "singl",
        "sky": "sky",
        "news": "news",
        "howe": "howe",
        "atlas": "atlas",
        "cosmos": "cosmos",
        "bias": "bias",
        "andes": "andes",
    }
)
_INVARIANT_AFTER_1A: Final = frozenset(
    ("inning", "outing", "canning", "herring", "earring", "proceed", "exceed", "succeed")
)

# (suffix, replacement), longest first so the first match is the longest.
_STEP1B: Final = ("eedly", "ingly", "edly", "eed", "ing", "ed")
_STEP2: Final = (
    ("ization", "ize"),
    ("ational", "ate"),
    ("fulness", "ful"),
    ("ousness", "ous"),
    ("iveness", "ive"),
    ("tional", "tion"),
    ("biliti", "ble"),
    ("lessli", "less"),
    ("entli", "ent"),
    ("ation", "ate"),
    ("alism", "al"),
    ("aliti", "al"),
    ("ousli", "ous"),
    ("iviti", "ive"),
    ("fulli", "ful"),
    ("enci", "ence"),
    ("anci", "ance"),
    ("abli", "able"),
    ("izer", "ize"),
    ("ator", "ate"),
    ("alli", "al"),
    ("bli", "ble"),
    ("ogi", "og"),  # only after "l"
    ("li", ""),  # only after a valid li-ending
)
_STEP3: Final = (
    ("ational", "ate"),
    ("tional", "tion"),
    ("alize", "al"),
    ("icate", "ic"),
    ("iciti", "ic"),
    ("ative", ""),  # only in R2
    ("ical", "ic"),
    ("ness", ""),
    ("ful", ""),
)
_STEP4: Final = (
    "ement",
    "ance",
    "ence",
    "able",
    "ible",
    "ment",
    "ant",
    "ent",
    "ism",
    "ate",
    "iti",
    "ous",
    "ive",
    "ize",
    "ion",  # only after "s" or "t"
    "al",
    "er",
    "ic",
)


@lru_cache(maxsize=1 << 16)
def stem(word: str) -> str:
    """Porter2 stem of a lowercase ASCII word; memoised because chat text repeats words."""
    exception = _EXCEPTIONS.get(word)
    if exception is not None:
        return exception
    if len(word) <= 2:
        return word
    w = _mark_consonant_y(word.lstrip("'"))
    r1, r2 = _regions(w)
    w = _step0(w)
    w = _step1a(w)
    if w in _INVARIANT_AFTER_1A:
        return w
    w = _step1b(w, r1)
    w = _step1c(w)
    w = _step2(w, r1)
    w = _step3(w, r1, r2)
    w = _step4(w, r2)
    w = _step5(w, r1, r2)
    return w.replace("Y", "y")


def _mark_consonant_y(word: str) -> str:
    """Uppercase a y at the start of the word or after a vowel: it is a consonant there."""
    if "y" not in word:
        return word
    chars = list(word)
    for i, c in enumerate(chars):
        if c == "y" and (i == 0 or chars[i - 1] in _VOWELS):
            chars[i] = "Y"
    return "".join(chars)


def _region_start(w: str, start: int) -> int:
    for i in range(start + 1, len(w)):
        if w[i] not in _VOWELS and w[i - 1] in _VOWELS:
            return i + 1
    return len(w)


def _regions(w: str) -> tuple[int, int]:
    r1 = next((len(p) for p in _R1_PREFIXES if w.startswith(p)), -1)
    if r1 < 0:
        r1 = _region_start(w, 0)
    return r1, _region_start(w, r1)


def _ends_short_syllable(w: str) -> bool:
    """Non-vowel, vowel, non-vowel other than w/x/Y at the end; or vowel, non-vowel as the
    whole word."""
    if len(w) == 2:
        return w[0] in _VOWELS and w[1] not in _VOWELS
    return (
        len(w) >= 3
        and w[-3] not in _VOWELS
        and w[-2] in _VOWELS
        and w[-1] not in _VOWELS
        and w[-1] not in "wxY"
    )


def _step0(w: str) -> str:
    for suffix in ("'s'", "'s", "'"):
        if w.endswith(suffix):
            return w[: -len(suffix)]
    return w


def _step1a(w: str) -> str:
    if w.endswith("sses"):
        return w[:-2]
    if w.endswith(("ied", "ies")):
        return w[:-2] if len(w) > 4 else w[:-1]
    if w.endswith(("us", "ss")):
        return w
    if w.endswith("s") and any(c in _VOWELS for c in w[:-2]):
        return w[:-1]
    return w


def _step1b(w: str, r1: int) -> str:
    for suffix in _STEP1B:
        if not w.endswith(suffix):
            continue
        base = w[: -len(suffix)]
        if suffix in ("eed", "eedly"):
            return base + "ee" if len(base) >= r1 else w
        if not any(c in _VOWELS for c in base):
            return w
        if base.endswith(("at", "bl", "iz")):
            return base + "e"
        if base.endswith(_DOUBLES):
            return base[:-1]
        if _ends_short_syllable(base) and r1 >= len(base):
            return base + "e"
        return base
    return w


def _step1c(w: str) -> str:
    if len(w) > 2 and w[-1] in "yY" and w[-2] not in _VOWELS:
        return w[:-1] + "i"
    return w


def _step2(w: str, r1: int) -> str:
    for suffix, replacement in _STEP2:
        if not w.endswith(suffix):
            continue
        base = w[: -len(suffix)]
        if len(base) < r1:
            return w
        if suffix == "ogi" and not base.endswith("l"):
            return w
        if suffix == "li" and (not base or base[-1] not in _LI_ENDINGS):
            return w
        return base + replacement
    return w


def _step3(w: str, r1: int, r2: int) -> str:
    for suffix, replacement in _STEP3:
        if not w.endswith(suffix):
            continue
        base = w[: -len(suffix)]
        if len(base) < r1 or (suffix == "ative" and len(base) < r2):
            return w
        return base + replacement
    return w


def _step4(w: str, r2: int) -> str:
    for suffix in _STEP4:
        if not w.endswith(suffix):
            continue
        base = w[: -len(suffix)]
        if len(base) < r2:
            return w
        if suffix == "ion" and not base.endswith(("s", "t")):
            return w
        return base
    return w


def _step5(w: str, r1: int, r2: int) -> str:
    if w.endswith("e"):
        base = w[:-1]
        if len(base) >= r2 or (len(base) >= r1 and not _ends_short_syllable(base)):
            return base
    elif w.endswith("ll") and len(w) - 1 >= r2:
        return w[:-1]
    return w
