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

from engine.dates import TimeSpan, find_time_spans, merge_spans
from engine.types import EntityKind, ExtractedEntity, ExtractedFact, ItemContext


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


def _phrases(text: str) -> frozenset[str]:
    return frozenset(p.strip() for p in text.split(",")) - {""}


# fmt: off
_STOP = _words("""
a an the and or but so if then than that that's this these those there there's here it it's
its is isn't are aren't was wasn't were be been being am do does did didn't don't doesn't
done have has had having haven't i i'm i've i'll i'd me my mine you you're you've you'll
you'd your yours he she him her his they them their we us our what what's who whom whose
which when where why how how's to of in on at for with from by about as into like just
really very too also not no yes yeah yep nope all any anything something everything nothing
some much many more most can can't could will won't would shall should may might must gonna
wanna gotta up out over again still even ever now well oh ah aw aww hmm um uh let's let during
after before since until without within through across around near behind between among against
toward towards upon via per besides
""")
_FILLER = _words("""
hi hey hello hiya howdy thanks thank thx ty welcome bye goodbye cya lol lmao haha hahaha omg
wow whoa yay cool great nice awesome amazing wonderful fantastic good glad happy sure ok okay
alright right totally absolutely exactly definitely agreed agree same true congrats
congratulations cheers sounds sound see hear talk chat soon later doing going been new news
catch care take luck best cute beautiful lovely incredible stunning interesting fun super
sweet pretty such guess think know mean means lot hope proud inspiring cheering rooting woohoo woo
awww awwww safe stay how're shining yay
back things stuff way keep it's bet
""")
_ADVERBS = _words("""
really just also always never often usually still totally actually absolutely definitely only
even sometimes truly recently finally already kinda mostly honestly generally rarely seriously
literally especially certainly probably personally genuinely sincerely deeply hardly barely
simply then too both all once first now currently ultimately eventually def sorta
""")
_UNCHANGED_VERBS = _words("""
can could will would shall should may might must ought had was did got used gotta wanna gonna
went made saw took came gave found felt thought said told knew left met ran won bought brought
began wrote read put cut set hit let quit spent sent built lost kept slept heard held taught
caught fought sold stood understood became drove flew grew threw wore ate fell forgot chose
spoke woke sang swam drank rode hid led fed paid laid meant dealt dreamt learnt burnt stuck
struck shot sat shook broke bit blew drew tore hung lent lit sank shut spun split spread swore
swept swung stole stung dug fled forgave froze rose shone slid strove wept wound overcame
cannot and or but to a an the in on at of for with so as if too not
""")
_LABELS = _words("""
note update edit ps re subject title summary question answer q a warning tip example step date
time important fyi reminder todo source link location address status http https pros cons
tips caution result results goal goals plan plans idea ideas problem solution reason context
background details description overview conclusion ingredients instructions steps notes
""")
_TIME_WORDS = _words("""
january february march april may june july august september october november december jan feb
mar apr jun jul aug sep sept oct nov dec monday tuesday wednesday thursday friday saturday
sunday today yesterday tomorrow tonight spring summer autumn fall winter
""")
_COMMON_CAPS = _words("""
mom dad mum mommy daddy grandma grandpa granny god lol omg ok okay btw tbh imo fyi asap
tv diy ps hey hi hello wow yay thanks yes yeah no oh aw aww haha hmm
""")
_ORG_SUFFIX = _words("""
inc inc. corp corp. corporation llc ltd ltd. co co. company university college school academy
institute bank club group foundation association society agency department council committee
network press party union federation league lab labs studios records charity organization
organisation ministry church
""")
_PLACE_SUFFIX = _words("""
park street st avenue ave road rd boulevard beach lake river mountain mountains mount mt island
islands bay valley square station airport bridge stadium arena canyon falls forest garden
gardens zoo cafe café restaurant hotel city town county state village trail museum library
center centre hall market mall coast desert national
""")
_EVENT_SUFFIX = _words("""
festival conference con parade marathon race concert tournament championship summit fair expo
olympics cup games week day eve gala
""")
_PLACES = _phrases("""
afghanistan,argentina,australia,austria,bangladesh,belgium,brazil,bulgaria,cambodia,canada,
chile,china,colombia,croatia,cuba,czechia,denmark,egypt,england,ethiopia,finland,france,
germany,ghana,greece,hungary,iceland,india,indonesia,iran,iraq,ireland,israel,italy,jamaica,
japan,jordan,kenya,korea,lebanon,malaysia,mexico,morocco,nepal,netherlands,new zealand,
nigeria,norway,pakistan,peru,philippines,poland,portugal,romania,russia,scotland,serbia,
singapore,south africa,south korea,spain,sri lanka,sweden,switzerland,taiwan,tanzania,
thailand,turkey,uganda,ukraine,united kingdom,uk,united states,usa,us,america,vietnam,wales,
europe,asia,africa,antarctica,
new york,new york city,nyc,los angeles,la,san francisco,chicago,boston,seattle,portland,
miami,austin,dallas,houston,denver,atlanta,philadelphia,washington,las vegas,nashville,
san diego,phoenix,detroit,orlando,new orleans,honolulu,hawaii,alaska,california,texas,florida,
oregon,colorado,arizona,utah,nevada,montana,michigan,ohio,georgia,virginia,vermont,maine,
toronto,vancouver,montreal,banff,ottawa,london,paris,berlin,madrid,barcelona,rome,milan,
venice,florence,amsterdam,brussels,vienna,prague,budapest,warsaw,lisbon,dublin,edinburgh,
stockholm,oslo,copenhagen,helsinki,athens,istanbul,moscow,cairo,dubai,mumbai,delhi,
bangalore,beijing,shanghai,hong kong,tokyo,kyoto,osaka,seoul,bangkok,bali,sydney,melbourne,
auckland,rio de janeiro,buenos aires,mexico city,lima,cape town,nairobi,
""")
_EVENTS = _words("""
christmas easter halloween thanksgiving hanukkah diwali ramadan eid passover pride
""")
_ORGS = _phrases("""
nike,adidas,puma,under armour,gatorade,apple,google,microsoft,amazon,facebook,meta,starbucks,
walmart,target,ikea,disney,marvel,pixar,nba,nfl,mlb,nhl,fifa,uefa,nasa,unicef,unesco,
red cross,ymca,un,who,bbc,cnn,harvard,stanford,mit,oxford,cambridge,
""")
_CONTEXT_WORDS = _words("conversation chat session between user assistant meeting notes")
_HONORIFICS = _words("dr mr mrs ms prof")
_NAME_LEADS = _words("new san los las el saint north south east west great united")
_CONNECTORS = frozenset({"of", "the", "de", "la", "del", "von", "van", "da", "du", "&"})
_PRODUCTS = _words("""
iphone ipad macbook airpods playstation ps4 ps5 xbox nintendo switch kindle fitbit tesla
prius android pixel galaxy gopro canon nikon spotify netflix instagram tiktok youtube
""")
_PRODUCT_WORD = re.compile(
    r"\b(?:iphone|ipad|macbook|airpods|playstation|ps[45]|xbox|kindle|fitbit|gopro)\b", re.I
)
_PLACE_NOUNS = (
    "beach|park|museum|gym|library|school|office|church|hospital|lake|mountains?|cafe|café|"
    "restaurant|bar|store|shop|mall|studio|concert|festival|zoo|camp|campsite|forest|river|farm|"
    "garden|shelter|center|centre|theater|theatre|stadium|pool|market|airport|hotel|beach house"
)
# fmt: on

_APOS = str.maketrans({"’": "'", "‘": "'"})
_SPEAKER = re.compile(r"[ \t]*(?P<name>[A-Z][\w'’.-]*(?:[ \t]+[A-Z][\w'’.-]*){0,2})[ \t]*:[ \t]+")
_SHARE = re.compile(r"\[\s*(?:shares?|shared|sharing)\s+(?P<what>[^\]\n]+?)\s*\]", re.IGNORECASE)
_TERMINATOR = re.compile(r"(?:\.{3}|…|[.!?])+[\"'”’)\]]*(?=\s|$)")
_ABBREVIATIONS = _words(
    "dr mr mrs ms prof st jr sr vs etc e.g i.e a.m p.m u.s inc co ltd no mt approx dept fig "
    "jan feb mar apr jun jul aug sep sept oct nov dec"
)
_TOKEN = re.compile(r"[A-Za-z][A-Za-z'’]*")
_FIRST_PERSON = re.compile(
    r"(?<![\w'’-])(?:(?P<i>[Ii])(?P<adv>(?:\s+(?:" + "|".join(sorted(_ADVERBS)) + r"))*)"
    r"(?:\s+(?P<verb>[A-Za-z]+(?:n['’]t)?))?"
    r"|(?P<ic>[Ii]['’](?:m|ve|ll|d))(?P<after>\s+[A-Za-z]+)?"
    r"|(?P<pron>(?i:me|my|mine|myself|we['’](?:re|ve|ll|d)|we|us|our|ours|ourselves)))(?![\w'’-])"
)
_IS_FIRST_PERSON = re.compile(
    r"(?<![\w'’-])(?:[Ii](?:['’](?:m|ve|ll|d))?|(?i:me|my|mine|myself|we(?:['’](?:re|ve|ll|d))?|"
    r"us|our|ours))(?![\w'’-])"
)
_CONSEQUENCE = re.compile(
    r"^(?:so,|so\s+(?:i|we|he|she|they|it|my|our)\b|therefore\b|thus\b|hence\b|that['’]s\s+why\b|"
    r"that\s+is\s+why\b|as\s+a\s+result\b|because\s+of\s+(?:that|this)\b|consequently\b)",
    re.IGNORECASE,
)
_WHY = re.compile(
    r"(?:\bbecause(?!\s+of\s+(?:that|this)\b)|['’]cause\b|\bcuz\b|\bso\s+that|\bsince\s+(?=(?:i|we|"
    r"you|he|she|they|it|there|this|that|the|my|our|his|her|their)\b))\s*(?P<why>[^.!?;]+)",
    re.IGNORECASE,
)
_QUOTED = re.compile(
    r"[\"“”](?P<q>[A-Z0-9][^\"“”\n]{1,80}?)[\"“”]|(?<![\w'’])['‘](?P<s>[A-Z][^'‘’\n]{1,80}?)['’](?!\w)"
)
# A capitalised run, optionally ending in a number that belongs to the name ("Room 101",
# "Apollo 11", "Terminal 3"), so names that differ only in their number stay apart.
_CAPITALISED = re.compile(
    r"(?<![\w'’])[A-Z][\w'’&.-]*(?:\s+(?:(?:of(?:\s+the)?|de|la|del|von|van|da|du|&)\s+)?"
    r"[A-Z][\w'’&.-]*)*(?:\s+\d{1,6}[A-Za-z]?\b(?![.,:/]\d)"
    r"(?!\s+(?:times?|days?|weeks?|months?|years?|hours?|minutes?|people|kids|am|pm|of)\b))?"
)
_MID_CAPITAL = re.compile(r"(?<=[a-z,;]\s)[A-Z][a-z]+")
_PERSON_CUE = re.compile(
    r"(?:\bwith|\bmy\s+(?:\w+\s+)?(?:friend|sister|brother|mom|mother|dad|father|son|daughter|"
    r"wife|husband|partner|boyfriend|girlfriend|cousin|aunt|uncle|colleague|coworker|boss|"
    r"neighbou?r|mentor|teacher|niece|nephew|buddy)|\b(?:met|told|asked|called|texted|named|by)"
    r"|['’]s\s+(?:friend|sister|brother|mom|dad|wife|husband|partner|son|daughter))\s+$",
    re.IGNORECASE,
)
_TITLE_CUE = re.compile(
    r"\b(?:book|novel|movie|film|song|album|show|series|game|play|podcast|called|titled|"
    r"reading|read|watched|watching|playing|listening\s+to)\s+(?:the\s+)?$",
    re.IGNORECASE,
)
_PLACE_CUE = re.compile(
    r"(?:\b(?:in|at|near|visited|visiting|visit|around|across|through|toward|towards)|"
    r"\b(?:go|goes|going|went|gone|moved?|moving|trip|travel\w*|flew|fly|flying|drove|drive|"
    r"driving|head(?:ed|ing)?|back|came|come|coming|return\w*|vacation|holiday|relocat\w*)"
    r"\s+(?:\w+\s+)?to)\s+(?:the\s+)?$",
    re.IGNORECASE,
)
_PLACE_PHRASE = re.compile(
    r"\b(?:at|in|to|from)\s+(?P<place>(?:the|a|an)\s+(?:[a-z]+\s+)?(?:" + _PLACE_NOUNS + r"))\b"
)
_DANGLING = re.compile(r"\b(?:on|in|at|during|since|by|from|for|of)\s*$", re.IGNORECASE)
_DISCOURSE = re.compile(
    r"^(?:(?:so|well|oh|also|anyway|and|but|yeah|yes|hey|wow|btw|by the way),?\s+)+", re.I
)
_UNSET_REFERENCE = datetime(2000, 1, 1, tzinfo=UTC)  # finds expressions when no date is known


@dataclass(frozen=True)
class _Sentence:
    start: int
    end: int
    speaker: str | None
    shared: bool = False  # a "[shares <caption>]" attachment, not words the speaker wrote


class LocalExtractor:
    """Rule-based extraction, good enough to be the default when no LLM is configured."""

    def extract(self, text: str, item: ItemContext) -> list[ExtractedFact]:
        sentences = list(_sentences(text, item.speaker))
        names = _participants(item, sentences)
        capitalised_mid = frozenset(_MID_CAPITAL.findall(text))
        facts: list[ExtractedFact] = []
        previous_speaker: str | None = None
        for sentence in sentences:
            raw = text[sentence.start : sentence.end]
            if not sentence.shared and _is_filler(raw, names):
                continue
            causes = (
                [len(facts) - 1]
                if facts and previous_speaker == sentence.speaker and _CONSEQUENCE.match(raw)
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
                )
            )
            previous_speaker = sentence.speaker
        return facts


def _sentences(text: str, default_speaker: str | None) -> Iterator[_Sentence]:
    """Sentences with their offsets; a "Name:" line prefix sets the speaker for what follows."""
    speaker = default_speaker
    for line in re.finditer(r"[^\n]+", text):
        start, end = line.start(), line.end()
        prefix = _SPEAKER.match(text, start, end)
        if prefix:  # "Caroline: ..." names the speaker; "Note: ..." is only a label
            if prefix.group("name").lower().rstrip(".") not in _LABELS:
                speaker = prefix.group("name")
            start = prefix.end()
        cursor = start
        for share in _SHARE.finditer(text, start, end):
            yield from _split_sentences(text, cursor, share.start(), speaker)
            yield _Sentence(share.start("what"), share.end("what"), speaker, shared=True)
            cursor = share.end()
        yield from _split_sentences(text, cursor, end, speaker)


def _split_sentences(text: str, start: int, end: int, speaker: str | None) -> Iterator[_Sentence]:
    """Split on terminators, except after abbreviations, initials and before lower case."""
    cursor = start
    for m in _TERMINATOR.finditer(text, start, end):
        punct = m.group(0)
        following = text[m.end() : end].lstrip()
        if "!" not in punct and "?" not in punct:
            word = text[cursor : m.start()].rsplit(None, 1)[-1:] or [""]
            token = word[0].lower().strip("(\"'")
            if token in _ABBREVIATIONS or re.fullmatch(r"[a-z]|(?:[a-z]\.)+[a-z]", token):
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
        if not _is_common(word) and word.lower() not in _CONTEXT_WORDS:
            names.add(word)
    return frozenset(names)


def _is_filler(sentence: str, names: frozenset[str]) -> bool:
    """True for greetings and reactions without content ("Hey Mel!", "Wow, that's great!")."""
    tokens = [t.translate(_APOS) for t in _TOKEN.findall(sentence)]
    content = [
        t
        for t in tokens
        if len(t) > 1 and t.lower() not in _STOP and t.lower() not in _FILLER and t not in names
    ]
    if not content:
        return True
    vocative = all(t[0].isupper() for t in content) and len(content) <= 2
    return vocative and len(tokens) > len(content) and tokens[0].lower() in _FILLER


def _fact(
    raw: str,
    sentence: _Sentence,
    *,
    item: ItemContext,
    names: frozenset[str],
    capitalised_mid: frozenset[str],
    causes: list[int],
) -> ExtractedFact:
    speaker = sentence.speaker
    if sentence.shared:
        body = f"{speaker} shared {raw}" if speaker else f"Shared {raw}"
    else:
        body = _rewrite(raw, speaker) if speaker else raw
    first_person = sentence.shared or (
        _IS_FIRST_PERSON.search(raw) is not None and not raw.rstrip().endswith("?")
    )
    reference = item.mentioned_at or _UNSET_REFERENCE
    spans = find_time_spans(body, reference)
    window = merge_spans(spans, body)
    dated = window is not None and item.mentioned_at is not None
    entities = _entities(body, names, capitalised_mid)
    if speaker and first_person and all(e.name != speaker for e in entities):
        entities.insert(0, ExtractedEntity(speaker, "person"))
    who = [e.name for e in entities if e.kind == "person"]
    if speaker and first_person:
        who = [speaker, *(w for w in who if w != speaker)]
    where = next((e.name for e in entities if e.kind == "place"), None)
    if where is None and (phrase := _PLACE_PHRASE.search(body)):
        where = phrase.group("place")
    why = _WHY.search(body)
    return ExtractedFact(
        text=_annotated(body, spans if dated else []),
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
        lower = pron.lower().translate(_APOS)
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

    return _FIRST_PERSON.sub(replace, sentence)


def _third_person(verb: str) -> str:
    """ "love" → "loves", "go" → "goes", "try" → "tries"; past forms and modals unchanged."""
    lower = verb.lower().translate(_APOS)
    irregular = {"am": "is", "are": "is", "were": "was", "have": "has", "do": "does"}
    irregular |= {"don't": "doesn't", "haven't": "hasn't", "aren't": "isn't", "go": "goes"}
    if lower in irregular:
        return irregular[lower]
    past = lower.endswith("ed") and not lower.endswith("eed")  # "loved", not "need"
    if lower in _UNCHANGED_VERBS or past or lower.endswith("n't") or lower in _ADVERBS:
        return verb
    if lower.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if len(lower) > 1 and lower.endswith("y") and lower[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def _annotated(body: str, spans: list[TimeSpan]) -> str:
    """The fact text with each relative expression followed by its absolute date."""
    out: list[str] = []
    cursor = 0
    for span in spans:
        if re.search(r"\b(?:19|20)\d{2}\b", span.expression):
            continue  # already absolute
        end = span.char_end
        if possessive := re.match(r"['’]s\b", body[end:]):
            end += possessive.end()
        out += [body[cursor:end], f" ({span.label()})"]
        cursor = end
    text = "".join([*out, body[cursor:]]).strip()
    return text if text[-1:] in ".!?…" else text + "."


def _what(body: str, spans: list[TimeSpan]) -> str:
    """The sentence without its time expressions, discourse markers and end punctuation."""
    parts: list[str] = []
    cursor = 0
    for span in spans:
        parts.append(_DANGLING.sub("", body[cursor : span.char_start]))
        cursor = span.char_end
    parts.append(body[cursor:])
    what = " ".join(" ".join(parts).split())
    what = re.sub(r"\s+([,.!?;:])", r"\1", what)
    what = _DISCOURSE.sub("", what).strip(" ,;:-.!?…")
    if len(what) > 200:
        what = what[:200].rsplit(" ", 1)[0]
    return what[:1].upper() + what[1:]


def _entities(
    body: str, names: frozenset[str], capitalised_mid: frozenset[str]
) -> list[ExtractedEntity]:
    found: dict[str, ExtractedEntity] = {}
    quoted_spans: list[tuple[int, int]] = []
    for m in _QUOTED.finditer(body):
        title = (m.group("q") or m.group("s")).strip(" ,.!?")
        found.setdefault(title.lower(), ExtractedEntity(title, "title"))
        quoted_spans.append((m.start(), m.end()))
    sentence_starts = {0} | {m.end() for m in re.finditer(r"[.!?:]\s+|[\"“(]", body)}
    for m in _CAPITALISED.finditer(body):
        if any(a <= m.start() < b for a, b in quoted_spans):
            continue
        for start, group, after_the in _name_groups(body, m, names):
            tokens = group
            if start in sentence_starts and len(tokens) > 1 and tokens[0].endswith(("ing", "ly")):
                tokens = tokens[1:]  # "Adding NYC to ..."
            name = " ".join(tokens)
            if len(name) < 2:
                continue
            known = name in names or name.lower() in _PLACES or name in capitalised_mid
            if (
                start in sentence_starts
                and len(tokens) == 1
                and not known
                and not after_the
                and not _subject_of_verb(body, start, name)
            ):
                continue  # "Painting is my passion": sentence-initial words are not names
            kind = _kind(name, body[:start], names, after_the)
            found.setdefault(name.lower(), ExtractedEntity(name, kind))
    for product in _PRODUCT_WORD.finditer(body):  # "iPhone", "kindle": not always capitalised
        found.setdefault(product.group(0).lower(), ExtractedEntity(product.group(0), "product"))
    return list(found.values())


# "Ivo bought a bicycle": a capitalised first word directly followed by a common verb of a
# person (or "and <Name>") is taken as a name; gerunds ("Painting is") and common words are not.
_PERSON_VERB = re.compile(
    r"\s+(?:is|was|has|had|will|would|can|could|did|does|went|met|said|says|told|tells|got|"
    r"made|makes|took|takes|gave|saw|sees|came|comes|bought|found|felt|feels|thinks|thought|"
    r"loves|loved|likes|liked|wants|wanted|needs|needed|works|worked|lives|lived|moved|"
    r"started|opened|visited|adopted|plays|played|runs|ran|joined|married|studies|studied|"
    r"teaches|taught|wrote|writes|and\s+[A-Z][a-z]+)\b"
)


def _subject_of_verb(body: str, start: int, name: str) -> bool:
    if name.lower().endswith("ing") or _is_common(name) or name.lower() in _TIME_WORDS:
        return False
    return _PERSON_VERB.match(body, start + len(name)) is not None


def _name_groups(
    body: str, m: re.Match[str], names: frozenset[str]
) -> Iterator[tuple[int, list[str], bool]]:
    """Split a capitalised run into names: "Tell Tim" → "Tim", "John's European trip" →
    "John", "European"; common and time words separate names, "of"/"de" join them."""
    group: list[str] = []
    group_start, after_the, previous_the = m.start(), False, False
    words = [(m.start() + w.start(), w.group(0)) for w in re.finditer(r"\S+", m.group(0))]
    for index, (position, word) in enumerate(words):
        token = word.translate(_APOS).rstrip(".,-")
        if re.fullmatch(r"(?:[A-Z]\.)+[A-Z]", token) or token.lower() in _HONORIFICS:
            token += "."  # "J.K.", "Dr."
        possessive = token.endswith("'s")
        base = token.removesuffix("'s")
        if base[:1].isdigit():
            if group:  # "Room 101"; a number after a dropped word ("May 2023") is no name
                group.append(base)
            continue
        if group and base.lower() in _CONNECTORS:
            group.append(base)
            continue
        leads_name = base.lower() in _NAME_LEADS and index + 1 < len(words)
        common = not leads_name and (_is_common(base) or base.lower() in _TIME_WORDS)
        if common or (base in names and group):
            while group and group[-1].lower() in _CONNECTORS:
                group.pop()
            if group:
                yield group_start, group, after_the
            group = []
            if common:
                previous_the = base.lower() == "the"
                continue
        if not group:
            group_start, after_the = position, previous_the
        group.append(base)
        previous_the = False
        if possessive:
            yield group_start, group, after_the
            group = []
    while group and group[-1].lower() in _CONNECTORS:
        group.pop()
    if group:
        yield group_start, group, after_the


def _is_common(token: str) -> bool:
    lower = token.lower()
    if token.isupper() and len(token) > 1:
        return lower in _COMMON_CAPS  # "US" is the country, "OK" is not a name
    if "'" in lower and not lower.endswith("'s"):
        return True  # "They're", "I'm"
    return lower in _STOP or lower in _FILLER or lower in _COMMON_CAPS or lower in _LABELS


def _kind(name: str, before: str, names: frozenset[str], after_the: bool) -> EntityKind:
    lower, last = name.lower(), name.rsplit(maxsplit=1)[-1].lower()
    if name in names or name.split(maxsplit=1)[0].lower().rstrip(".") in _HONORIFICS:
        return "person"
    if last in _ORG_SUFFIX:
        return "organization"
    if lower in _PLACES or last in _PLACE_SUFFIX:
        return "place"
    if lower in _EVENTS or (last in _EVENT_SUFFIX and " " in name):
        return "event"
    if lower in _ORGS:
        return "organization"
    if lower in _PRODUCTS or name.split(maxsplit=1)[0].lower() in _PRODUCTS:
        return "product"
    tail = before[-40:]
    if _TITLE_CUE.search(tail):
        return "title"
    if _PLACE_CUE.search(tail):
        return "place"
    if after_the or before.lower().endswith("the "):
        return "other"  # "the Wolves", "the Hobbit": not a person's name
    if _PERSON_CUE.search(tail):
        return "person"
    if name.isupper():
        return "other"  # acronyms: LGBTQ, NASA
    if name.split(maxsplit=1)[0] in names:
        return "person"  # "Caroline Smith"
    return "person" if " " not in name else "other"  # chat: a lone capitalised word is a name
