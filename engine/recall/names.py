"""The entity names a query may speak of, as the keys entity resolution stores.

Every run of up to MAX_WORDS consecutive words ("Project Atlas", "Alice's") and, in Chinese
text, every run of 2..MAX_HAN characters (a name jieba would split, "林晓雯", as well as
"上海"), normalised by `engine.entities.normalize_name` — so a key equals
`entities.normalized_name` or one of `aliases_normalized` exactly when the query names that
entity, Traditional characters folded to Simplified as retain folds them. The graph arm looks
the keys up through the (bank_id, normalized_name) unique index and the aliases GIN index:
one probe per key, about a millisecond for a question's ~40 keys.
"""

from __future__ import annotations

import re
from typing import Final

from engine.chinese import HAN_CLASS, HAN_RUN_RE
from engine.entities import normalize_name

MAX_WORDS: Final = 4
MAX_HAN: Final = 6
MAX_KEYS: Final = 256  # a pasted paragraph as a query still costs one bounded probe
# Words with inner apostrophes, dots and hyphens kept ("O'Brien", "U.S.", "Jean-Luc").
_WORD: Final = re.compile(rf"[^\W_{HAN_CLASS}]+(?:['’.\-][^\W_{HAN_CLASS}]+)*'?s?")
_CLAUSE: Final = re.compile(rf"[,;:!?()\[\]\"“”]|[{HAN_CLASS}]+")


def name_keys(query: str) -> list[str]:
    """Distinct normalised candidate names in the query, in order of appearance."""
    keys: dict[str, None] = {}
    for run in HAN_RUN_RE.findall(query):
        for size in range(2, min(MAX_HAN, len(run)) + 1):
            for start in range(len(run) - size + 1):
                keys.setdefault(normalize_name(run[start : start + size]))
    for clause in _CLAUSE.split(query):
        words = _WORD.findall(clause)
        for size in range(1, MAX_WORDS + 1):
            for start in range(len(words) - size + 1):
                keys.setdefault(normalize_name(" ".join(words[start : start + size])))
    keys.pop("", None)
    return list(keys)[:MAX_KEYS]
