"""The default fact extractor: deterministic, CPU-only, no network, no model.

One fact per contentful sentence. Greetings and filler are dropped; first-person speech is
rewritten to the speaker ("Caroline: I went ..." → "Caroline went ...") so that each fact
stands alone; relative dates are resolved with `engine.dates` and written out after the
expression ("yesterday (7 May 2023)") so that BM25 and embeddings can match them; entities
come from capitalisation, quotes, cue words and a small gazetteer.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

from engine.chinese import HAN_CLASS, BankSegmenter, ChineseSegmenter, default_segmenter, has_han
from engine.dates import TimeSpan, find_time_spans, merge_spans
from engine.dates.chinese import chinese_label
from engine.extraction import local_chinese
from engine.extraction.lexicon import (
    ABBREVIATIONS,
    ADVERBS,
    APOS,
    CONSEQUENCE,
    CONTEXT_WORDS,
    DANGLING,
    DISCOURSE,
    FILLER,
    FIRST_PERSON,
    IS_FIRST_PERSON,
    LABELS,
    MID_CAPITAL,
    PLACE_PHRASE,
    SHARE,
    SPEAKER,
    STOP,
    TERMINATOR,
    TOKEN,
    UNCHANGED_VERBS,
    WHY,
)
from engine.extraction.local_entities import find_entities, is_common
from engine.lifecycle.importance import local_importance
from engine.types import ExtractedEntity, ExtractedFact, ItemContext

_UNSET_REFERENCE = datetime(2000, 1, 1, tzinfo=UTC)  # finds expressions when no date is known


@dataclass(frozen=True)
class _Sentence:
    start: int
    end: int
    speaker: str | None
    shared: bool = False  # a "[shares <caption>]" attachment, not words the speaker wrote


class LocalExtractor:
    """Rule-based extraction, good enough to be the default when no LLM is configured."""

    def __init__(
        self, segmenter: ChineseSegmenter | None = None, known_names: frozenset[str] = frozenset()
    ) -> None:
        """`known_names`: entity names the bank already has, kept whole when Chinese text is
        segmented (see `with_known_names`)."""
        self._segmenter = segmenter or default_segmenter()
        self._known = known_names

    def with_known_names(self, names: frozenset[str]) -> LocalExtractor:
        """An extractor for one bank: its known entity names are recognised next time."""
        return LocalExtractor(self._segmenter, self._known | names)

    def extract(self, text: str, item: ItemContext) -> list[ExtractedFact]:
        sentences = list(_sentences(text, item.speaker))
        names = _participants(item, sentences)
        capitalised_mid = frozenset(MID_CAPITAL.findall(text))
        facts: list[ExtractedFact] = []
        previous_speaker: str | None = None
        segmenter: BankSegmenter | None = None
        for sentence in sentences:
            raw = text[sentence.start : sentence.end]
            if local_chinese.is_chinese(raw):
                if local_chinese.is_filler(raw):
                    continue
                if segmenter is None:
                    segmenter = self._segmenter.for_bank(self._known | names)
                facts.append(
                    local_chinese.chinese_fact(
                        raw,
                        sentence.speaker,
                        item=item,
                        names=names | self._known,
                        segmenter=segmenter,
                        source=(sentence.start, sentence.end),
                        causes=[],
                    )
                )
                previous_speaker = sentence.speaker
                continue
            if not sentence.shared and _is_filler(raw, names):
                continue
            if segmenter is None and has_han(raw):
                segmenter = self._segmenter.for_bank(self._known | names)
            causes = (
                [len(facts) - 1]
                if facts and previous_speaker == sentence.speaker and CONSEQUENCE.match(raw)
                else []
            )
            facts.append(
                _fact(
                    raw,
                    sentence,
                    item=item,
                    names=names,
                    capitalised_mid=capitalised_mid,
                    causes=causes,
                    segmenter=segmenter,
                )
            )
            previous_speaker = sentence.speaker
        return facts


# A line of Latin words with Chinese sentences in it: Han characters ended by Chinese
# punctuation.
_MIXED_LINE = re.compile(f"[{HAN_CLASS}][^。！？；]*[。！？；]")


def _sentences(text: str, default_speaker: str | None) -> Iterator[_Sentence]:
    """Sentences with their offsets; a "Name:" line prefix sets the speaker for what follows."""
    speaker = default_speaker
    for line in re.finditer(r"[^\n]+", text):
        start, end = line.start(), line.end()
        if local_chinese.is_chinese(line.group()) or _MIXED_LINE.search(line.group()):
            # Cut at Chinese punctuation, then each sentence takes the path of its language:
            # "用户：我 prefer VS Code。Last week I switched to uv." is two sentences.
            named, start = local_chinese.speaker_prefix(text, start, end)
            if named and named.lower().rstrip(".") not in LABELS:
                speaker = named
            for first, last in local_chinese.split_sentences(text, start, end):
                if local_chinese.is_chinese(text[first:last]):
                    yield _Sentence(first, last, speaker)
                else:
                    yield from _split_sentences(text, first, last, speaker)
            continue
        prefix = SPEAKER.match(text, start, end)
        if prefix:  # "Caroline: ..." names the speaker; "Note: ..." is only a label
            if prefix.group("name").lower().rstrip(".") not in LABELS:
                speaker = prefix.group("name")
            start = prefix.end()
        cursor = start
        for share in SHARE.finditer(text, start, end):
            yield from _split_sentences(text, cursor, share.start(), speaker)
            yield _Sentence(share.start("what"), share.end("what"), speaker, shared=True)
            cursor = share.end()
        yield from _split_sentences(text, cursor, end, speaker)


def _split_sentences(text: str, start: int, end: int, speaker: str | None) -> Iterator[_Sentence]:
    """Split on terminators, except after abbreviations, initials and before lower case."""
    cursor = start
    for m in TERMINATOR.finditer(text, start, end):
        punct = m.group(0)
        following = text[m.end() : end].lstrip()
        if "!" not in punct and "?" not in punct:
            word = text[cursor : m.start()].rsplit(None, 1)[-1:] or [""]
            token = word[0].lower().strip("(\"'")
            if token in ABBREVIATIONS or re.fullmatch(r"[a-z]|(?:[a-z]\.)+[a-z]", token):
                continue
            if following[:1].islower():
                continue
        yield from _trimmed(text, cursor, m.end(), speaker)
        cursor = m.end()
    yield from _trimmed(text, cursor, end, speaker)


def _trimmed(text: str, start: int, end: int, speaker: str | None) -> Iterator[_Sentence]:
    chunk = text[start:end]
    stripped = chunk.strip()
    if stripped:
        offset = start + len(chunk) - len(chunk.lstrip())
        yield _Sentence(offset, offset + len(stripped), speaker)


def _participants(item: ItemContext, sentences: list[_Sentence]) -> frozenset[str]:
    """Known people: speakers, plus capitalised words of the context ("between A and B")."""
    names = {s.speaker for s in sentences if s.speaker}
    if item.speaker:
        names.add(item.speaker)
    for word in re.findall(r"\b[A-Z][a-z]+\b", item.context):
        if not is_common(word) and word.lower() not in CONTEXT_WORDS:
            names.add(word)
    return frozenset(names)


def _is_filler(sentence: str, names: frozenset[str]) -> bool:
    """True for greetings and reactions without content ("Hey Mel!", "Wow, that's great!")."""
    tokens = [t.translate(APOS) for t in TOKEN.findall(sentence)]
    content = [
        t
        for t in tokens
        if len(t) > 1 and t.lower() not in STOP and t.lower() not in FILLER and t not in names
    ]
    if not content:
        return True
    vocative = all(t[0].isupper() for t in content) and len(content) <= 2
    return vocative and len(tokens) > len(content) and tokens[0].lower() in FILLER


def _fact(
    raw: str,
    sentence: _Sentence,
    *,
    item: ItemContext,
    names: frozenset[str],
    capitalised_mid: frozenset[str],
    causes: list[int],
    segmenter: BankSegmenter | None = None,
) -> ExtractedFact:
    """A fact of a sentence written mostly in Latin script; Chinese words in it (a name, a
    first person 我, a date) are handled as the Chinese path would (`segmenter` is given when
    the sentence has Han characters)."""
    speaker = sentence.speaker
    mixed = segmenter is not None and has_han(raw)
    if sentence.shared:
        body = f"{speaker} shared {raw}" if speaker else f"Shared {raw}"
    else:
        body = _rewrite(raw, speaker) if speaker else raw
        if mixed and speaker:
            body = local_chinese.rewrite(body, speaker)
    first_person = sentence.shared or (
        (IS_FIRST_PERSON.search(raw) is not None or (mixed and local_chinese.is_first_person(raw)))
        and not raw.rstrip().endswith(("?", "？"))
    )
    reference = item.mentioned_at or _UNSET_REFERENCE
    spans = find_time_spans(body, reference)
    window = merge_spans(spans, body)
    dated = window is not None and item.mentioned_at is not None
    entities = find_entities(body, names, capitalised_mid)
    if segmenter is not None and mixed:
        known = {e.name for e in entities}
        # Chinese names, and Latin names right before Chinese words ("Bob 下个月要去"), which
        # capitalisation alone cannot tell from a sentence's first word.
        entities += [
            e
            for e in local_chinese.find_entities(body, names, segmenter)
            if not any(e.name == k or e.name in k.split() for k in known)
            and (has_han(e.name) or re.search(rf"\b{re.escape(e.name)}\s*[{HAN_CLASS}]", body))
        ]
    if speaker and first_person and all(e.name != speaker for e in entities):
        entities.insert(0, ExtractedEntity(speaker, "person"))
    who = [e.name for e in entities if e.kind == "person"]
    if speaker and first_person:
        who = [speaker, *(w for w in who if w != speaker)]
    where = next((e.name for e in entities if e.kind == "place"), None)
    if where is None and (phrase := PLACE_PHRASE.search(body)):
        where = phrase.group("place")
    why = WHY.search(body)
    text = _attributed(_annotated(body, spans if dated else []), speaker)
    return ExtractedFact(
        text=text,
        fact_type="experience" if first_person else "world",
        who=who,
        what=_what(body, spans),
        where=where,
        when=window.expression if window else None,
        why=why.group("why").strip(" ,") if why else None,
        occurred_start=window.start if window and dated else None,
        occurred_end=window.end if window and dated else None,
        entities=entities,
        source_start=sentence.start,
        source_end=sentence.end,
        causes=causes,
        importance=local_importance(raw, len(entities)),
    )


def _rewrite(sentence: str, speaker: str) -> str:
    """First person to the speaker: "I'm" → "Caroline is", "my" → "Caroline's", "we" →
    "Caroline and others"; the rest stays verbatim."""

    def replace(m: re.Match[str]) -> str:
        if m.group("i"):
            verb = m.group("verb")
            adverbs = m.group("adv") or ""
            return speaker + adverbs + (" " + _third_person(verb) if verb else "")
        if m.group("ic"):
            after = m.group("after") or ""
            kind = m.group("ic")[-1].lower()
            if kind == "d":
                nxt = after.strip().lower()
                had = nxt in ("been", "had", "better", "gone", "done", "seen") or nxt.endswith("ed")
                return f"{speaker} {'had' if had else 'would'}{after}"
            verb = {"m": "is", "e": "has", "l": "will"}[kind]
            return f"{speaker} {verb}{after}"
        pron = m.group("pron")
        lower = pron.lower().translate(APOS)
        if pron == "US":
            return pron  # the country
        return {
            "me": speaker,
            "my": f"{speaker}'s",
            "mine": f"{speaker}'s",
            "myself": "themself",
            "we": f"{speaker} and others",
            "us": f"{speaker} and others",
            "our": f"{speaker}'s",
            "ours": f"{speaker}'s",
            "ourselves": "themselves",
            "we're": f"{speaker} and others are",
            "we've": f"{speaker} and others have",
            "we'll": f"{speaker} and others will",
            "we'd": f"{speaker} and others would",
        }[lower]

    return FIRST_PERSON.sub(replace, sentence)


def _third_person(verb: str) -> str:
    """ "love" → "loves", "go" → "goes", "try" → "tries"; past forms and modals unchanged."""
    lower = verb.lower().translate(APOS)
    irregular = {"am": "is", "are": "is", "were": "was", "have": "has", "do": "does"}
    irregular |= {"don't": "doesn't", "haven't": "hasn't", "aren't": "isn't", "go": "goes"}
    if lower in irregular:
        return irregular[lower]
    past = lower.endswith("ed") and not lower.endswith("eed")  # "loved", not "need"
    if lower in UNCHANGED_VERBS or past or lower.endswith("n't") or lower in ADVERBS:
        return verb
    if lower.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if len(lower) > 1 and lower.endswith("y") and lower[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def _absolute(span: TimeSpan) -> bool:
    return re.search(r"\b(?:19|20)\d{2}\b", span.expression) is not None


def _written_out_after(body: str, span: TimeSpan, following: list[TimeSpan]) -> bool:
    """ "on Tuesday 24 Nov 2026": the day's date follows it, written out already."""
    return any(
        _absolute(f) and not body[span.char_end : f.char_start].strip(" ,") for f in following
    )


def _annotated(body: str, spans: list[TimeSpan]) -> str:
    """The fact text with each relative expression followed by its absolute date."""
    out: list[str] = []
    cursor = 0
    for i, span in enumerate(spans):
        if _absolute(span) or _written_out_after(body, span, spans[i + 1 : i + 2]):
            continue
        end = span.char_end
        if possessive := re.match(r"['’]s\b", body[end:]):
            end += possessive.end()
        if has_han(span.expression):  # "下个月（2026年11月）" inside an English sentence
            label = f"（{chinese_label(span.start.date(), span.end.date())}）"
        else:
            label = f" ({span.label()})"
        out += [body[cursor:end], label]
        cursor = end
    text = "".join([*out, body[cursor:]]).strip()
    return text if text[-1:] in ".!?…。！？" else text + "."


def _attributed(text: str, speaker: str | None) -> str:
    """The text said by whom, when it does not name its speaker already: "They were stoked
    for the dinosaur exhibit!" → "Melanie: They were stoked ...". A question names a person
    ("What did Melanie's kids like?"), and MaxSim and BM25 then favour the speaker's facts
    that happen to name them over those that do not. LoCoMo conv 1-5, recall@10 over
    categories 1-4: 0.747 → 0.764 (single-hop 0.777 → 0.809, multi-hop 0.537 → 0.538).
    Measured and rejected: also naming whom "you" means when the turn says it ("Thanks,
    Gina!" → "Jon to Gina: You found ..."): 0.7697 → 0.7693, multi-hop 0.562 → 0.557."""
    if not speaker or re.search(rf"(?<![\w'’-]){re.escape(speaker)}(?![\w-])", text):
        return text
    return f"{speaker}: {text}"


def _what(body: str, spans: list[TimeSpan]) -> str:
    """The sentence without its time expressions, discourse markers and end punctuation."""
    parts: list[str] = []
    cursor = 0
    for span in spans:
        parts.append(DANGLING.sub("", body[cursor : span.char_start]))
        cursor = span.char_end
    parts.append(body[cursor:])
    what = " ".join(" ".join(parts).split())
    what = re.sub(r"\s+([,.!?;:])", r"\1", what)
    what = DISCOURSE.sub("", what).strip(" ,;:-.!?…")
    if len(what) > 200:
        what = what[:200].rsplit(" ", 1)[0]
    return what[:1].upper() + what[1:]
