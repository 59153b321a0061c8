"""Entity resolution: decide whether a mention names an entity the bank already knows.

Pure functions; the caller fetches candidates (trigram search on `normalized_name`, plus
aliases, kind, last_seen and co-occurring entity ids) and stores the outcome.

The rule we hold above all: never merge two distinct entities. Hindsight merged "Tigran"
into "Iran" and "Room 101" into "Room 102"; a missed merge only splits an entity's facts
(semantic and BM25 recall still find them), a wrong merge corrupts every answer about both.
So every non-exact path needs name evidence *and* context evidence, and each has vetoes.

Tiers, strongest first (the best tier that accepts wins; inside a tier the best score,
then the smallest entity_id):

0 canonical  normalised mention == normalised canonical name.
1 alias      normalised mention == a normalised alias. Aliases are the only way acronyms
             and nicknames resolve ("NYC" -> "New York City", "Ann" -> "Anna").
2 title      persons only: same name once honorifics are removed, and either two or more
             tokens ("Dr. John Smith" -> "John Smith") or the same honorific spelled
             differently ("Doctor Smith" -> "Dr Smith"); no context evidence needed.
3 partial    persons only: one name's tokens are an ordered subsequence of the other's.
             Given-name form (the short name is the long name's leading tokens, "Caroline"
             <-> "Caroline Smith") needs >= PARTIAL_GIVEN_MIN_SHARED shared co-occurring
             entity or last_seen within PARTIAL_RECENT_DAYS. Any other form (surname,
             "Dr. Smith" -> "John Smith", skipped middle names) needs
             >= PARTIAL_STRONG_MIN_SHARED. Rejected when another name of the candidate is
             a conflicting full name, or when several candidates qualify and none dominates
             (>= AMBIGUOUS_DOMINANT_MIN_SHARED shared while every other has 0).
4 fuzzy      typo: same token count, exactly one aligned token differs, that pair is
             alphabetic (Latin/Greek/Cyrillic), both >= FUZZY_MIN_TOKEN_LEN characters,
             neither contains the other, at most FUZZY_MAX_EDITS edits, and
             (Jaro-Winkler >= FUZZY_MIN_JARO_WINKLER or trigram >= FUZZY_MIN_TRIGRAM),
             plus >= FUZZY_MIN_SHARED shared co-occurring entities. Recency alone is not
             enough: people in one circle are seen together, typo or not.

Vetoes on every non-exact tier: known kinds that differ ("other" is the unknown wildcard);
different identifier tokens (anything with a digit, "jr"/"sr", roman numerals of 2+
letters from i/v/x: "Room 101"/"Room 102", "Henry"/"Henry VIII"); different honorifics
("Mr Smith"/"Mrs Smith"); a candidate already named by another mention of the same fact.

Score (ranking only; acceptance is the rules above):
    score = W_NAME * name_sim + W_COOCCURRENCE * jaccard + W_RECENCY * recency
    name_sim = 1 for exact tiers, else max(Jaro-Winkler, trigram) of the normalised names
    jaccard  = |mention co-occurring ids & candidate's| / |union| (0 when both empty)
    recency  = 0.5 ** (|seen_at - last_seen| in days / RECENCY_HALF_LIFE_DAYS), 0 if unknown
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from types import MappingProxyType
from typing import Literal

from engine.chinese import default_segmenter
from engine.errors import InvalidInput

W_NAME = 0.6
W_COOCCURRENCE = 0.3
W_RECENCY = 0.1
RECENCY_HALF_LIFE_DAYS = 90.0

FUZZY_MIN_JARO_WINKLER = 0.92  # "carolyn"/"caroline" = 0.921; "tigran"/"iran" = 0.889
FUZZY_MIN_TRIGRAM = 0.6
FUZZY_MIN_TOKEN_LEN = 5  # Jon/John/Joan differ by one letter: short names are not typos
FUZZY_MAX_EDITS = 2  # optimal string alignment distance
FUZZY_MIN_SHARED = 2

PARTIAL_GIVEN_MIN_SHARED = 1
PARTIAL_RECENT_DAYS = 30.0
PARTIAL_STRONG_MIN_SHARED = 2
AMBIGUOUS_DOMINANT_MIN_SHARED = 2

JARO_WINKLER_BOOST_THRESHOLD = 0.7  # Winkler's prefix bonus only above this Jaro score
JARO_WINKLER_PREFIX_SCALE = 0.1
JARO_WINKLER_MAX_PREFIX = 4

UNKNOWN_KIND = "other"
PERSON_KIND = "person"

# Honorifics dropped before comparing person names; spelled-out forms map to the short one.
TITLES = MappingProxyType(
    {t: t for t in ("mr", "mrs", "ms", "miss", "mx", "dr", "prof", "sir", "dame", "lord")}
    | {"lady": "lady", "rev": "rev", "doctor": "dr", "professor": "prof", "reverend": "rev"}
)
GENERATION_SUFFIXES = frozenset({"jr", "sr"})

MatchKind = Literal["canonical", "alias", "title", "partial", "fuzzy", "new"]
_TIERS: MappingProxyType[MatchKind, int] = MappingProxyType(
    {"canonical": 0, "alias": 1, "title": 2, "partial": 3, "fuzzy": 4, "new": 5}
)

_APOSTROPHES = MappingProxyType(str.maketrans(dict.fromkeys("\u2019\u2018\u02bc`", "'")))
# Latin letters without a canonical decomposition, folded like their accented cousins.
_LETTER_FOLDS = MappingProxyType(
    str.maketrans({"ø": "o", "đ": "d", "ð": "d", "ł": "l", "ħ": "h", "ŧ": "t", "ı": "i"})
    | str.maketrans({"æ": "ae", "œ": "oe", "þ": "th"})
)
_KEEP_AT_EDGES = frozenset("#&%@*")  # "C#" must not become "C"
_NON_DECIMAL_DOT = re.compile(r"(?<!\d)\.|\.(?!\d)")  # "u.s.a" -> "usa", "3.5" stays
_TRIGRAM_WORD = re.compile(r"[^\W_]+")  # pg_trgm words: runs of alphanumerics
_ROMAN = re.compile(r"x{0,3}(ix|iv|v?i{0,3})")
_MARKED_SCRIPTS = ("LATIN", "GREEK", "CYRILLIC")


@dataclass(frozen=True)
class Candidate:
    """An existing entity of the bank that the trigram search returned."""

    entity_id: str
    canonical_name: str
    aliases: tuple[str, ...] = ()
    kind: str = UNKNOWN_KIND
    last_seen: datetime | None = None
    cooccurring: frozenset[str] = frozenset()  # ids of entities it has appeared with


@dataclass(frozen=True)
class Mention:
    """One entity name in a new fact. `cooccurring_names` are the other entities of the
    same fact/chunk: a candidate carrying one of those names is that mention's entity."""

    name: str
    kind: str = UNKNOWN_KIND
    seen_at: datetime | None = None
    cooccurring_names: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Resolution:
    """`entity_id` None means: create a new entity. `reason` is for traces and tests."""

    entity_id: str | None
    score: float
    match: MatchKind
    reason: str

    @property
    def is_new(self) -> bool:
        return self.entity_id is None


def normalize_name(name: str) -> str:
    """The comparison key stored in `entities.normalized_name`; idempotent.

    NFKC, casefold, Traditional Chinese folded to Simplified (keys only: names keep their
    characters), accents stripped from Latin/Greek/Cyrillic only (kana voicing marks and
    Indic vowel signs carry meaning), dashes and underscores become spaces, punctuation
    trimmed from token edges, dots dropped unless between digits, a trailing possessive
    "'s" dropped, leading "the" dropped. Legal suffixes ("Inc") are kept: no magic.
    """
    if name.isascii():  # fast path for most names: NFKC, marks and folds change nothing
        spaced = name.lower().replace("-", " ").replace("_", " ").replace("`", "'")
        tokens = " ".join(_clean_token(raw) for raw in spaced.split()).split()
    else:
        visible = "".join(ch for ch in name if unicodedata.category(ch) != "Cf")  # zero-widths
        text = unicodedata.normalize("NFKC", visible).casefold().translate(_APOSTROPHES)
        text = default_segmenter().simplified(text)  # 臺北 and 台北 are one place
        spaced = "".join(
            " " if ch.isspace() or unicodedata.category(ch) in ("Pd", "Pc") else ch for ch in text
        )
        cleaned = " ".join(_clean_token(raw) for raw in spaced.split())
        # Marks go after punctuation so a removed dot cannot leave a mark on a new base letter.
        tokens = _strip_marks(cleaned).translate(_LETTER_FOLDS).split()
    while tokens and tokens[-1].endswith("'s") and len(tokens[-1]) > 2:
        tokens[-1] = _clean_token(tokens[-1][:-2])
        if not tokens[-1]:
            tokens.pop()
    while len(tokens) > 1 and tokens[0] == "the":
        tokens.pop(0)
    return " ".join(tokens)


def trigram_similarity(a: str, b: str) -> float:
    """pg_trgm's `similarity()`: lowercase, alphanumeric words padded "  w ", set Jaccard.

    Differs from Postgres only where it hashes non-ASCII trigrams (rare collisions)."""
    left, right = _trigrams(a), _trigrams(b)
    if not left or not right:
        return 0.0
    shared = len(left & right)
    return shared / (len(left) + len(right) - shared)


def jaro_winkler(a: str, b: str) -> float:
    """Jaro-Winkler similarity in [0, 1]; the prefix bonus applies above Jaro 0.7."""
    if a == b:
        return 1.0
    if not a or not b:
        return 0.0
    window = max(max(len(a), len(b)) // 2 - 1, 0)
    a_hit = [False] * len(a)
    b_hit = [False] * len(b)
    matches = 0
    for i, ch in enumerate(a):
        for j in range(max(0, i - window), min(len(b), i + window + 1)):
            if not b_hit[j] and b[j] == ch:
                a_hit[i] = b_hit[j] = True
                matches += 1
                break
    if matches == 0:
        return 0.0
    a_seq = [ch for ch, hit in zip(a, a_hit, strict=True) if hit]
    b_seq = [ch for ch, hit in zip(b, b_hit, strict=True) if hit]
    transpositions = sum(x != y for x, y in zip(a_seq, b_seq, strict=True)) // 2
    jaro = (matches / len(a) + matches / len(b) + (matches - transpositions) / matches) / 3
    if jaro <= JARO_WINKLER_BOOST_THRESHOLD:
        return jaro
    prefix = 0
    for x, y in zip(a[:JARO_WINKLER_MAX_PREFIX], b[:JARO_WINKLER_MAX_PREFIX], strict=False):
        if x != y:
            break
        prefix += 1
    return jaro + prefix * JARO_WINKLER_PREFIX_SCALE * (1.0 - jaro)


def resolve_mention(
    mention: Mention,
    candidates: Sequence[Candidate],
    cooccurring_ids: frozenset[str] = frozenset(),
) -> Resolution:
    """Pick the candidate `mention` names, or None for a new entity.

    `cooccurring_ids` are the entities already resolved for the other mentions of the same
    fact/chunk (e.g. their exact-name hits): positive evidence when a candidate has appeared
    with them, and a veto for non-exact matches to those entities themselves.
    """
    normalized = normalize_name(mention.name)
    if not normalized:
        raise InvalidInput("name", f"entity name {mention.name!r} is empty once normalised")
    others = frozenset(normalize_name(n) for n in mention.cooccurring_names) - {normalized}
    assessed = [
        _assess(mention, normalized, candidate, others, cooccurring_ids) for candidate in candidates
    ]
    assessed = _settle_partials(assessed)
    accepted = [a for a in assessed if a.accepted]
    if accepted:
        best = min(accepted, key=lambda a: (_TIERS[a.match], -a.score, a.candidate.entity_id))
        return Resolution(best.candidate.entity_id, best.score, best.match, best.reason)
    if not assessed:
        return Resolution(None, 0.0, "new", "new: no candidates")
    closest = min(assessed, key=lambda a: (-a.name_sim, a.candidate.entity_id))
    return Resolution(None, 0.0, "new", f"new: closest {closest.reason}")


@dataclass(frozen=True)
class _Name:
    text: str
    tokens: tuple[str, ...]
    titles: frozenset[str]  # canonical honorifics at the start (persons only)
    core: tuple[str, ...]  # tokens after the honorifics
    identifiers: tuple[str, ...]  # sorted tokens that must agree for any non-exact match


@dataclass(frozen=True)
class _Assessment:
    candidate: Candidate
    match: MatchKind
    accepted: bool
    name_sim: float
    shared: int
    score: float
    reason: str
    partial_eligible: bool = False  # a partial name match before the evidence gate


def _assess(
    mention: Mention,
    normalized: str,
    candidate: Candidate,
    others: frozenset[str],
    cooccurring_ids: frozenset[str],
) -> _Assessment:
    canonical = normalize_name(candidate.canonical_name)
    aliases = tuple(n for n in (normalize_name(a) for a in candidate.aliases) if n)
    names = tuple(dict.fromkeys(n for n in (canonical, *aliases) if n))
    shared = len(cooccurring_ids & candidate.cooccurring)
    union = len(cooccurring_ids | candidate.cooccurring)
    jaccard = shared / union if union else 0.0
    recency = _recency(mention.seen_at, candidate.last_seen)
    name_sim = max((_name_similarity(normalized, n) for n in names), default=0.0)
    label = f"{candidate.entity_id} {candidate.canonical_name!r}"

    def verdict(match: MatchKind, ok: bool, why: str, eligible: bool = False) -> _Assessment:
        sim = 1.0 if match in ("canonical", "alias") else name_sim
        score = W_NAME * sim + W_COOCCURRENCE * jaccard + W_RECENCY * recency
        detail = f"{label}: {why} (name={sim:.3f} shared={shared} recency={recency:.3f})"
        return _Assessment(candidate, match, ok, sim, shared, score, detail, eligible)

    if not _kinds_compatible(mention.kind, candidate.kind):
        return verdict("new", False, f"kind {mention.kind} != {candidate.kind}")
    if normalized == canonical:
        return verdict("canonical", True, "exact canonical name")
    if normalized in aliases:
        return verdict("alias", True, "exact alias")
    if candidate.entity_id in cooccurring_ids or others & set(names):
        return verdict("new", False, "named by another mention of the same fact")

    person = PERSON_KIND in (mention.kind, candidate.kind)
    mine = _parse(normalized, person)
    theirs = [_parse(n, person) for n in names]
    relations = sorted((_relate(mine, other, person) for other in theirs), key=lambda r: r[0])
    rank, why = relations[0]
    if rank == _TITLE:
        return verdict("title", True, why)
    if rank in (_PARTIAL_GIVEN, _PARTIAL_STRONG):
        conflicts = [o.text for o in theirs if _conflicting_full_names(mine, o)]
        if conflicts:
            return verdict("new", False, f"{why}, but conflicts with {conflicts[0]!r}")
        recent = recency >= 0.5 ** (PARTIAL_RECENT_DAYS / RECENCY_HALF_LIFE_DAYS)
        if rank == _PARTIAL_GIVEN:
            ok = shared >= PARTIAL_GIVEN_MIN_SHARED or recent
        else:
            ok = shared >= PARTIAL_STRONG_MIN_SHARED
        return verdict("partial", ok, why if ok else f"{why}, too little evidence", True)
    if rank == _FUZZY:
        ok = shared >= FUZZY_MIN_SHARED
        return verdict("fuzzy", ok, why if ok else f"{why}, too little evidence")
    return verdict("new", False, why)


def _settle_partials(assessed: list[_Assessment]) -> list[_Assessment]:
    """A partial name fits several entities: keep one only when co-occurrence singles it out."""
    eligible = [a for a in assessed if a.partial_eligible]
    if len({a.candidate.entity_id for a in eligible}) <= 1:
        return assessed
    ranked = sorted(eligible, key=lambda a: (-a.shared, a.candidate.entity_id))
    top, runner_up = ranked[0], ranked[1]
    dominant = top.shared >= AMBIGUOUS_DOMINANT_MIN_SHARED and runner_up.shared == 0
    settled: list[_Assessment] = []
    for a in assessed:
        if a.partial_eligible and not (dominant and a is top):
            why = f"{a.reason}; ambiguous among {len(eligible)} partial matches"
            settled.append(replace(a, match="new", accepted=False, reason=why))
        else:
            settled.append(a)
    return settled


# Relation ranks between two non-identical names, strongest first.
_TITLE, _PARTIAL_GIVEN, _PARTIAL_STRONG, _FUZZY, _NONE = range(5)


def _relate(mine: _Name, other: _Name, person: bool) -> tuple[int, str]:
    pair = f"{mine.text!r} vs {other.text!r}"
    if mine.identifiers != other.identifiers:
        return _NONE, f"{pair}: identifier tokens differ"
    if mine.titles and other.titles and mine.titles != other.titles:
        return _NONE, f"{pair}: titles differ"
    if person and mine.core and other.core:
        if mine.core == other.core:
            if len(mine.core) >= 2 or mine.titles == other.titles:
                return _TITLE, f"{pair}: same name, title absent or spelled differently"
            return _PARTIAL_STRONG, f"{pair}: title + surname"
        short, long = sorted((mine.core, other.core), key=len)
        if _is_subsequence(short, long):
            if long[: len(short)] == short:
                return _PARTIAL_GIVEN, f"{pair}: given-name form"
            return _PARTIAL_STRONG, f"{pair}: surname or partial form"
    return _fuzzy(mine.core, other.core, pair)


def _fuzzy(mine: tuple[str, ...], other: tuple[str, ...], pair: str) -> tuple[int, str]:
    if len(mine) != len(other):
        return _NONE, f"{pair}: different words"
    diffs = [(a, b) for a, b in zip(mine, other, strict=True) if a != b]
    if len(diffs) != 1:
        return _NONE, f"{pair}: {len(diffs)} words differ"
    a, b = diffs[0]
    if not (_is_alphabetic(a) and _is_alphabetic(b)):
        return _NONE, f"{pair}: not an alphabetic word"
    if a in b or b in a:
        return _NONE, f"{pair}: one word contains the other"
    if min(len(a), len(b)) < FUZZY_MIN_TOKEN_LEN:
        return _NONE, f"{pair}: too short for a typo"
    jw, trigram = jaro_winkler(a, b), trigram_similarity(a, b)
    if jw < FUZZY_MIN_JARO_WINKLER and trigram < FUZZY_MIN_TRIGRAM:
        return _NONE, f"{pair}: not similar enough (jw={jw:.3f} trgm={trigram:.3f})"
    edits = _edit_distance(a, b)  # last: the costliest check
    if edits > FUZZY_MAX_EDITS:
        return _NONE, f"{pair}: {edits} edits"
    return _FUZZY, f"{pair}: typo (jw={jw:.3f} trgm={trigram:.3f} edits={edits})"


def _conflicting_full_names(mine: _Name, other: _Name) -> bool:
    """Two full names neither of which extends the other: "Caroline Smith"/"Caroline Jones"."""
    if len(mine.core) < 2 or len(other.core) < 2:
        return False
    return not (_is_subsequence(mine.core, other.core) or _is_subsequence(other.core, mine.core))


def _parse(normalized: str, person: bool) -> _Name:
    tokens = tuple(normalized.split(" "))
    titles: list[str] = []
    if person:
        while len(titles) < len(tokens) - 1 and tokens[len(titles)] in TITLES:
            titles.append(tokens[len(titles)])
    core = tokens[len(titles) :]
    identifiers = tuple(sorted(t for t in tokens if _is_identifier(t)))
    return _Name(normalized, tokens, frozenset(TITLES[t] for t in titles), core, identifiers)


def _is_identifier(token: str) -> bool:
    if any(ch.isdigit() for ch in token) or token in GENERATION_SUFFIXES:
        return True
    return len(token) >= 2 and _ROMAN.fullmatch(token) is not None


def _kinds_compatible(a: str, b: str) -> bool:
    return a == b or UNKNOWN_KIND in (a, b)


def _recency(seen_at: datetime | None, last_seen: datetime | None) -> float:
    if seen_at is None or last_seen is None:
        return 0.0
    days = abs((seen_at - last_seen).total_seconds()) / 86400.0
    return float(0.5 ** (days / RECENCY_HALF_LIFE_DAYS))


def _name_similarity(a: str, b: str) -> float:
    return max(jaro_winkler(a, b), trigram_similarity(a, b))


def _is_subsequence(short: tuple[str, ...], long: tuple[str, ...]) -> bool:
    remaining = iter(long)
    return all(token in remaining for token in short)


def _is_alphabetic(token: str) -> bool:
    return all(
        ch.isalpha() and unicodedata.name(ch, "").startswith(_MARKED_SCRIPTS) for ch in token
    )


def _edit_distance(a: str, b: str) -> int:
    """Optimal string alignment distance (Levenshtein plus adjacent transpositions)."""
    before: list[int] = []
    previous = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        current = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                current[j] = min(current[j], before[j - 2] + 1)
        before, previous = previous, current
    return previous[-1]


def _trigrams(text: str) -> frozenset[str]:
    grams: set[str] = set()
    for word in _TRIGRAM_WORD.findall(text.lower()):
        padded = f"  {word} "
        grams.update(padded[i : i + 3] for i in range(len(padded) - 2))
    return frozenset(grams)


def _strip_marks(text: str) -> str:
    """Drop combining marks that sit on Latin, Greek or Cyrillic letters only."""
    kept: list[str] = []
    strip = False
    for ch in unicodedata.normalize("NFD", text):
        if unicodedata.category(ch) == "Mn":
            if not strip:
                kept.append(ch)
            continue
        strip = unicodedata.name(ch, "").startswith(_MARKED_SCRIPTS)
        kept.append(ch)
    return unicodedata.normalize("NFC", "".join(kept))


def _clean_token(token: str) -> str:
    while True:
        cleaned = _NON_DECIMAL_DOT.sub("", _trim_punctuation(token))
        cleaned = _trim_punctuation(cleaned)
        if cleaned == token:
            return cleaned
        token = cleaned


def _trim_punctuation(token: str) -> str:
    start, end = 0, len(token)
    while start < end and _edge_punctuation(token[start]):
        start += 1
    while end > start and _edge_punctuation(token[end - 1]):
        end -= 1
    return token[start:end]


def _edge_punctuation(ch: str) -> bool:
    return unicodedata.category(ch).startswith("P") and ch not in _KEEP_AT_EDGES
