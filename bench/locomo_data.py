"""The LoCoMo data set, loaded and normalised as `../shared/data/locomo/README.md` prescribes.

Evidence needs repair before scoring: some entries pack several ids in one string
("D8:6; D9:17", "D9:1 D4:4"), one is "D:11:26", one is zero-padded ("D30:05"), one is a bare
"D", and two name turns that do not exist. After repair, questions left without evidence (four,
all category 3) are left out, so categories 1-4 hold 1,536 questions and category 5 holds 446.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final

EXPECTED_SHA256: Final = "79fa87e90f04081343b8c8debecb80a9a6842b76a7aa537dc9fdf651ea698ff4"
DEFAULT_DATA: Final = Path("../shared/data/locomo/locomo10.json")
CATEGORY_NAMES: Final = MappingProxyType(
    {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
)
# "1:56 pm on 8 May, 2023"; strptime matches %p and %B case-insensitively.
_SESSION_DATE_FORMAT: Final = "%I:%M %p on %d %B, %Y"
_SESSION_KEY: Final = re.compile(r"session_(\d+)")
_EVIDENCE_SPLIT: Final = re.compile(r"[;,\s]+")
# "D8:6", and the malformed "D:11:26"; zero padding is removed by the int() round trip.
_EVIDENCE_ID: Final = re.compile(r"D:?(\d+):(\d+)")


class DataError(Exception):
    """The file is not the LoCoMo release the protocol was written for."""


@dataclass(frozen=True)
class Turn:
    dia_id: str
    session: int
    speaker: str
    content: str  # "<speaker>: <text>" plus " [shares <blip_caption>]" when present
    session_date: str  # as written in the data, e.g. "1:56 pm on 8 May, 2023"
    timestamp: datetime  # the session date, UTC


@dataclass(frozen=True)
class Session:
    number: int
    date: datetime
    raw_date: str
    turns: tuple[Turn, ...]


@dataclass(frozen=True)
class Question:
    question: str
    category: int
    evidence: frozenset[str]


@dataclass(frozen=True)
class Conversation:
    number: int  # 1-based position in the file: what `--conversations 1-5` selects
    sample_id: str
    sessions: tuple[Session, ...]
    questions: tuple[Question, ...]

    @property
    def turns(self) -> list[Turn]:
        return [turn for session in self.sessions for turn in session.turns]

    @property
    def query_time(self) -> datetime:
        """The protocol's "now" for temporal parsing: the start of the last session."""
        return self.sessions[-1].date


@dataclass
class NormalisationReport:
    """What evidence repair changed, so a run can show the file was read as intended."""

    multi_id_strings: int = 0
    malformed_ids: int = 0  # "D:11:26"
    zero_padded_ids: int = 0
    unparseable: list[str] = field(default_factory=list)  # e.g. a bare "D"
    missing_turns: list[str] = field(default_factory=list)  # "conv-42 D10:19"
    dropped_questions: Counter[int] = field(default_factory=Counter)  # category -> count

    def summary(self) -> str:
        dropped = ", ".join(f"category {c}: {n}" for c, n in sorted(self.dropped_questions.items()))
        return (
            f"evidence normalised: {self.multi_id_strings} multi-id strings split, "
            f"{self.malformed_ids} 'D:s:t' ids fixed, {self.zero_padded_ids} zero-padded ids "
            f"fixed, unparseable dropped {self.unparseable}, ids of missing turns dropped "
            f"{self.missing_turns}; questions left without evidence and left out: "
            f"{sum(self.dropped_questions.values())} ({dropped or 'none'})"
        )


@dataclass(frozen=True)
class LocomoData:
    conversations: tuple[Conversation, ...]
    report: NormalisationReport
    sha256: str


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def parse_session_date(raw: str) -> datetime:
    try:
        return datetime.strptime(raw.strip(), _SESSION_DATE_FORMAT).replace(tzinfo=UTC)
    except ValueError as exc:
        raise DataError(f"unexpected session date {raw!r}") from exc


def turn_content(raw: dict[str, Any]) -> str:
    content = f"{raw['speaker']}: {raw['text']}"
    caption = raw.get("blip_caption")
    return f"{content} [shares {caption}]" if caption else content


def normalise_evidence(
    sample_id: str, raw: list[str], known: set[str], report: NormalisationReport
) -> frozenset[str]:
    """Gold dia_ids of one question, repaired; ids of turns that do not exist are dropped."""
    ids: set[str] = set()
    for entry in raw:
        parts = [p for p in _EVIDENCE_SPLIT.split(entry.strip()) if p]
        if len(parts) > 1:
            report.multi_id_strings += 1
        for part in parts:
            match = _EVIDENCE_ID.fullmatch(part)
            if match is None:
                report.unparseable.append(f"{sample_id} {part!r}")
                continue
            dia_id = f"D{int(match.group(1))}:{int(match.group(2))}"
            if part.startswith("D:"):
                report.malformed_ids += 1
            elif part != dia_id:
                report.zero_padded_ids += 1
            if dia_id not in known:
                report.missing_turns.append(f"{sample_id} {dia_id}")
                continue
            ids.add(dia_id)
    return frozenset(ids)


def parse_conversation(
    number: int, raw: dict[str, Any], report: NormalisationReport
) -> Conversation:
    body: dict[str, Any] = raw["conversation"]
    sample_id = str(raw["sample_id"])
    sessions: list[Session] = []
    # Sessions with a date but no turns exist in the file; only sessions with turns count,
    # so the "last session" is the last one that was actually held.
    numbers = sorted(
        int(m.group(1)) for key in body if (m := _SESSION_KEY.fullmatch(key)) is not None
    )
    for n in numbers:
        raw_turns = body[f"session_{n}"]
        if not raw_turns:
            continue
        raw_date = str(body[f"session_{n}_date_time"])
        date = parse_session_date(raw_date)
        turns = tuple(
            Turn(
                dia_id=str(t["dia_id"]),
                session=n,
                speaker=str(t["speaker"]),
                content=turn_content(t),
                session_date=raw_date,
                timestamp=date,
            )
            for t in raw_turns
        )
        sessions.append(Session(n, date, raw_date, turns))
    known = {t.dia_id for s in sessions for t in s.turns}
    questions: list[Question] = []
    for qa in raw["qa"]:
        category = int(qa["category"])
        evidence = normalise_evidence(sample_id, list(qa.get("evidence") or []), known, report)
        if not evidence:
            report.dropped_questions[category] += 1
            continue
        questions.append(Question(str(qa["question"]), category, evidence))
    return Conversation(number, sample_id, tuple(sessions), tuple(questions))


def load_locomo(path: Path, *, check_sha256: bool = True) -> LocomoData:
    digest = file_sha256(path)
    if check_sha256 and digest != EXPECTED_SHA256:
        raise DataError(f"{path}: sha256 {digest}, expected {EXPECTED_SHA256}")
    raw = json.loads(path.read_text(encoding="utf-8"))
    report = NormalisationReport()
    conversations = tuple(parse_conversation(i, c, report) for i, c in enumerate(raw, start=1))
    return LocomoData(conversations, report, digest)


def parse_selection(spec: str, count: int) -> list[int]:
    """`"1-5"`, `"1,3,7-10"` or `"all"` -> sorted 1-based conversation numbers."""
    if spec.strip().lower() == "all":
        return list(range(1, count + 1))
    chosen: set[int] = set()
    for raw in spec.split(","):
        part = raw.strip()
        if not part:
            continue
        low, sep, high = part.partition("-")
        try:
            start = int(low)
            end = int(high) if sep else start
        except ValueError as exc:
            raise ValueError(f"--conversations: cannot read {part!r}") from exc
        if not 1 <= start <= end <= count:
            raise ValueError(f"--conversations: {part!r} is outside 1-{count}")
        chosen.update(range(start, end + 1))
    if not chosen:
        raise ValueError("--conversations: nothing selected")
    return sorted(chosen)
