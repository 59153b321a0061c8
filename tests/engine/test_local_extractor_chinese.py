"""The local extractor on Chinese and mixed text: sentences, speakers, dates, entities."""

from __future__ import annotations

from datetime import UTC, datetime

from engine.chinese import default_segmenter
from engine.chunking import chunk_content
from engine.entities import normalize_name
from engine.extraction.local import LocalExtractor
from engine.types import ExtractedFact, ItemContext

# Friday 2 October 2026.
ITEM = ItemContext(datetime(2026, 10, 2, 15, 0, tzinfo=UTC))


def extract(text: str, item: ItemContext = ITEM) -> list[ExtractedFact]:
    return LocalExtractor().extract(text, item)


def test_sentences_split_at_chinese_punctuation_without_latin_full_stop() -> None:
    facts = extract("团队主要用 Postgres。小林负责开源栏目！他喜欢写长文吗？好的。")
    assert [f.text for f in facts] == [
        "团队主要用 Postgres。",
        "小林负责开源栏目！",
        "他喜欢写长文吗？",
    ]


def test_first_person_is_rewritten_to_the_speaker_with_an_absolute_date() -> None:
    (fact,) = extract("用户：我下周去杭州")
    assert fact.text == "用户下周（2026年10月5日至11日）去杭州。"
    assert fact.fact_type == "experience"
    assert fact.who == ["用户"]
    assert fact.where == "杭州"
    assert fact.occurred_start == datetime(2026, 10, 5, tzinfo=UTC)
    assert fact.occurred_end == datetime(2026, 10, 12, tzinfo=UTC)


def test_last_week_is_the_previous_calendar_week() -> None:
    (fact,) = extract("上周那篇稿子被退回了。")
    assert (fact.occurred_start, fact.occurred_end) == (
        datetime(2026, 9, 21, tzinfo=UTC),
        datetime(2026, 9, 28, tzinfo=UTC),
    )


def test_people_rooms_titles_and_latin_names_are_entities() -> None:
    (fact,) = extract("小李住在101室，小林住在102室，都在读《百年孤独》，用 Postgres 记笔记。")
    entities = {(e.name, e.kind) for e in fact.entities}
    assert {
        ("小李", "person"),
        ("小林", "person"),
        ("101室", "place"),
        ("102室", "place"),
    } <= entities
    assert {("百年孤独", "title"), ("Postgres", "other")} <= entities


def test_known_names_stay_whole() -> None:
    text = "团子今天来了。"
    plain = {e.name for f in extract(text) for e in f.entities}
    known = LocalExtractor().with_known_names(frozenset({"团子"}))
    assert "团子" not in plain
    assert "团子" in {e.name for f in known.extract(text, ITEM) for e in f.entities}


def test_bank_segmenter_leaves_the_shared_dictionary_alone() -> None:
    base = default_segmenter()
    assert next(w.text for w in base.for_bank(["蓝鲸号"]).tagged("蓝鲸号今天来了")) == "蓝鲸号"
    assert "蓝鲸号" not in [w.text for w in base.tagged("蓝鲸号今天来了")]


def test_greetings_are_dropped() -> None:
    assert extract("哈哈哈！好的，谢谢！") == []


def test_traditional_text_keeps_its_characters_and_gets_dates() -> None:
    (fact,) = extract("我上週去了臺北。", ItemContext(ITEM.mentioned_at, speaker="小林"))
    assert fact.text.startswith("小林上週（2026年9月21日至27日）去了臺北")
    assert fact.occurred_start == datetime(2026, 9, 21, tzinfo=UTC)


def test_traditional_and_simplified_names_share_one_entity_key() -> None:
    assert normalize_name("臺北") == normalize_name("台北") == "台北"
    assert normalize_name("小林") == "小林"


def test_long_chinese_paragraph_is_chunked_at_sentence_ends() -> None:
    sentence = "小林负责开源栏目，写稿前先在沙箱里把代码跑通。"
    chunks = chunk_content("zh", sentence * 40, max_chars=200)
    assert len(chunks) > 1
    assert all(c.text.endswith("。") for c in chunks)


def test_english_sentence_with_a_chinese_name_stays_on_the_english_path() -> None:
    (fact,) = extract("Anna: I flew to 北京 with Tom yesterday.")
    assert fact.text == "Anna flew to 北京 with Tom yesterday (1 October 2026)."


def test_a_mixed_line_splits_by_language_and_rewrites_the_speaker_in_both() -> None:
    facts = extract(
        "用户：我 prefer 用 VS Code 写 Python，不喜欢 PyCharm。Last week I switched to uv."
    )
    assert [f.text for f in facts] == [
        "用户 prefer 用 VS Code 写 Python，不喜欢 PyCharm。",
        "Last week (25 September–1 October 2026) 用户 switched to uv.",
    ]
    assert all(f.who[:1] == ["用户"] and f.fact_type == "experience" for f in facts)
    assert "Last" not in {e.name for f in facts for e in f.entities}


def test_a_mostly_english_sentence_keeps_chinese_names_and_dates_the_chinese_way() -> None:
    (fact,) = extract("Bob 下个月要去 Shanghai 出差, he will present the roadmap at 阿里巴巴.")
    assert fact.text.startswith("Bob 下个月（2026年11月）要去")
    assert fact.occurred_start == datetime(2026, 11, 1, tzinfo=UTC)
    assert {"Bob", "Shanghai", "阿里巴巴"} <= {e.name for e in fact.entities}
    (fact,) = extract("小林说 the deadline is next Friday，截图要用 1440x900.")
    assert "小林" in {e.name for e in fact.entities}
    assert fact.occurred_start == datetime(2026, 10, 9, tzinfo=UTC)
