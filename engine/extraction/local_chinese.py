"""The Chinese side of the local extractor: sentences cut at Chinese punctuation, "用户：" speaker
prefixes, first person rewritten to the speaker, entities from jieba's part-of-speech tags,
and punctuation that respects the script (no "。." endings)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Final

from engine.chinese import HAN_RE as HAN_CHAR_RE
from engine.chinese import BankSegmenter, ChineseSegmenter, Word, has_han
from engine.dates import TimeSpan, find_time_spans, merge_spans
from engine.dates.chinese import chinese_label
from engine.types import EntityKind, ExtractedEntity, ExtractedFact, ItemContext

UNSET_REFERENCE: Final = datetime(2000, 1, 1, tzinfo=UTC)  # finds expressions without a date

# A sentence ends at 。！？；… (full-width or not) and any closing quotes or brackets after
# them; "!" and "?" count only inside Chinese text (the caller only uses this on such lines).
TERMINATOR: Final = re.compile(r"(?:[。！？；!?;]|…+|\.{3,})+[”’」』）)\]】]*")
# "用户：", "小林: " at the start of a line: a short name of Han characters or one Latin word.
SPEAKER: Final = re.compile(
    r"[ \t]*(?P<name>[\u4e00-\u9fff]{1,6}|[A-Za-z][\w.-]{0,30})[ \t]*[：:][ \t]*"
)
# Prefixes that label a line rather than name who speaks it.
LABELS: Final = frozenset(
    (
        *("注意", "备注", "提示", "说明", "时间", "地点", "标题", "总结", "问题"),
        *("回答", "原因", "结论", "要求", "规则", "附注", "补充", "例如", "比如"),
    )
)
# Whole sentences with no content: greetings, thanks, laughter, acknowledgements.
_FILLER: Final = re.compile(
    r"(?:哈+|呵+|嘿+|嗯+|哦+|噢+|啊+|哇+|好的?|好吧|行|可以|对|是的?|没错|谢谢(?:你|您|啦)?|"
    r"多谢|不客气|没事|你好|您好|早上好|晚安|再见|拜拜|太好了|太棒了|真棒|加油|收到|明白了?|"
    r"了解|ok|okay|[，,、 ~～])+"
)
_TRIM: Final = "，,、；;：: \t"
_END: Final = "。！？…!?"
# "我" not inside 自我 / 忘我; "我们" is the speaker and others.
_FIRST_PERSON: Final = re.compile(r"(?<![自忘])我们|(?<![自忘])我(?![们])")
_PERSON_PREFIX: Final = frozenset("小老阿")
_TITLE: Final = re.compile(r"《(?P<t>[^》]{1,40})》")
_ROOM: Final = re.compile(r"(?P<n>\d{1,5})\s*(?P<u>室|号房|号楼|楼|层|号)")
_LATIN_NAME: Final = re.compile(r"[A-Z][A-Za-z0-9+#.-]*[A-Za-z0-9+#]|[a-z]+[A-Z][A-Za-z0-9]*")
_KINDS: Final[dict[str, EntityKind]] = {
    "nr": "person",
    "nrfg": "person",
    "nrt": "organization",  # jieba tags transliterated brand names so ("阿里巴巴")
    "ns": "place",
    "nt": "organization",
    "nz": "other",
}


_LATIN_WORD: Final = re.compile(r"[A-Za-z]+")


def is_chinese(text: str) -> bool:
    """Chinese enough for the Chinese path: more than two Han characters per Latin word, so
    "团队主要用 Postgres" is Chinese and "Anna flew to 北京 with Tom" stays English."""
    if not has_han(text):
        return False
    han = sum(1 for _ in HAN_CHAR_RE.finditer(text))
    return han > 2 * len(_LATIN_WORD.findall(text))


def split_sentences(text: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    """(start, end) of each sentence of text[start:end], trimmed."""
    cursor = start
    for m in TERMINATOR.finditer(text, start, end):
        yield from _trimmed(text, cursor, m.end())
        cursor = m.end()
    yield from _trimmed(text, cursor, end)


def _trimmed(text: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    chunk = text[start:end]
    stripped = chunk.strip()
    if stripped:
        offset = start + len(chunk) - len(chunk.lstrip())
        yield offset, offset + len(stripped)


def speaker_prefix(text: str, start: int, end: int) -> tuple[str | None, int]:
    """The speaker a "名字：" prefix names (None for a label such as "注意：") and where the
    words after it start; (None, start) when the line has no such prefix."""
    m = SPEAKER.match(text, start, end)
    if m is None or m.end() >= end:
        return None, start
    name = m.group("name")
    return (None if name in LABELS else name), m.end()


def is_filler(sentence: str) -> bool:
    """True for "哈哈哈！", "好的，谢谢！": nothing left once greetings and reactions go."""
    core = sentence.strip().rstrip(_END + "～~。.")
    return not core or _FILLER.fullmatch(core.lower()) is not None


def is_first_person(sentence: str) -> bool:
    return _FIRST_PERSON.search(sentence) is not None


def rewrite(sentence: str, speaker: str) -> str:
    """ "我下周去杭州" → "用户下周去杭州", "我们团队" → "用户他们团队"."""
    return _FIRST_PERSON.sub(lambda m: speaker + ("他们" if m.group(0) == "我们" else ""), sentence)


def finish(text: str) -> str:
    """End a Chinese fact with Chinese punctuation, once: never "。."."""
    text = text.strip().rstrip(_TRIM)
    return text if text[-1:] in _END or text.endswith(("”", "」", "）")) else text + "。"


def annotated(body: str, spans: list[TimeSpan]) -> str:
    """Each relative expression followed by its absolute date: "上周（2026年9月21日至27日）"."""
    out: list[str] = []
    cursor = 0
    for span in spans:
        if re.search(
            r"(?<!\d)(?:19|20)\d{2}(?!\d)|[一二][〇零一二三四五六七八九]{3}年", span.expression
        ):
            continue  # already absolute
        out += [
            body[cursor : span.char_end],
            f"（{chinese_label(span.start.date(), span.end.date())}）",
        ]
        cursor = span.char_end
    return finish("".join([*out, body[cursor:]]))


def attributed(text: str, speaker: str | None) -> str:
    if not speaker or speaker in text:
        return text
    return f"{speaker}：{text}"


def what(body: str, spans: list[TimeSpan]) -> str:
    parts: list[str] = []
    cursor = 0
    for span in spans:
        parts.append(body[cursor : span.char_start])
        cursor = span.char_end
    parts.append(body[cursor:])
    return "".join(parts).strip(_TRIM + _END + "。")[:200]


def find_entities(
    body: str, names: frozenset[str], segmenter: ChineseSegmenter | BankSegmenter
) -> list[ExtractedEntity]:
    """People, places, organisations and other proper nouns from jieba's tags; Latin names
    inside the Chinese text ("Postgres"); titles in 《》; rooms and numbered places whole
    ("101室"), so they never merge with a neighbour's number."""
    found: dict[str, ExtractedEntity] = {}
    for title in _TITLE.finditer(body):
        found.setdefault(title.group("t"), ExtractedEntity(title.group("t"), "title"))
    for room in _ROOM.finditer(body):
        name = room.group("n") + room.group("u")
        found.setdefault(name, ExtractedEntity(name, "place"))
    words = segmenter.tagged(body)
    for index, word in enumerate(words):
        name, kind = _entity(words, index, names)
        if name and kind and not _inside_title(body, word):
            found.setdefault(name, ExtractedEntity(name, kind))
    return list(found.values())


def _entity(words: list[Word], index: int, names: frozenset[str]) -> tuple[str, EntityKind | None]:
    word = words[index]
    if word.text in names:
        return word.text, "person"
    if word.tag == "eng":
        return (word.text, "other") if _LATIN_NAME.fullmatch(word.text) else ("", None)
    if word.text in _PERSON_PREFIX and index + 1 < len(words):
        following = words[index + 1]
        if following.tag == "nr" and len(following.text) == 1:
            return word.text + following.text, "person"  # "小" + "李": 小李, not 李
        return "", None
    kind = _KINDS.get(word.tag)
    if kind is None or len(word.text) < 2:
        return "", None
    return word.text, kind


def _inside_title(body: str, word: Word) -> bool:
    return any(t.start() < word.start < t.end() for t in _TITLE.finditer(body))


def chinese_fact(
    raw: str,
    speaker: str | None,
    *,
    item: ItemContext,
    names: frozenset[str],
    segmenter: ChineseSegmenter | BankSegmenter,
    source: tuple[int, int],
    causes: list[int],
) -> ExtractedFact:
    """One fact from one Chinese sentence, the same fields the English path fills."""
    first_person = is_first_person(raw) and not raw.rstrip().endswith(("？", "?"))
    body = rewrite(raw, speaker) if speaker else raw
    spans = find_time_spans(body, item.mentioned_at or UNSET_REFERENCE)
    window = merge_spans(spans, body)
    dated = window is not None and item.mentioned_at is not None
    entities = find_entities(body, names | ({speaker} if speaker else set()), segmenter)
    if speaker and first_person and all(e.name != speaker for e in entities):
        entities.insert(0, ExtractedEntity(speaker, "person"))
    who = [e.name for e in entities if e.kind == "person"]
    if speaker and first_person:
        who = [speaker, *(w for w in who if w != speaker)]
    return ExtractedFact(
        text=attributed(annotated(body, spans if dated else []), speaker),
        fact_type="experience" if first_person else "world",
        who=who,
        what=what(body, spans),
        where=next((e.name for e in entities if e.kind == "place"), None),
        when=window.expression if window else None,
        why=None,
        occurred_start=window.start if window and dated else None,
        occurred_end=window.end if window and dated else None,
        entities=entities,
        source_start=source[0],
        source_end=source[1],
        causes=causes,
    )
