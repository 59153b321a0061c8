"""The rule-based extractor: sentences in, self-contained dated facts out."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from engine.extraction.local import LocalExtractor
from engine.types import ExtractedEntity, ExtractedFact, ItemContext

# The first LoCoMo session: 1:56 pm on 8 May 2023.
MENTIONED = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
CHAT = ItemContext(mentioned_at=MENTIONED, context="conversation between Caroline and Melanie")


def extract(text: str, item: ItemContext = CHAT) -> list[ExtractedFact]:
    return LocalExtractor().extract(text, item)


def only_fact(text: str, item: ItemContext = CHAT) -> ExtractedFact:
    facts = extract(text, item)
    assert len(facts) == 1, facts
    return facts[0]


CAROLINE = "Caroline: I went to a LGBTQ support group yesterday and it was so powerful."


def test_first_person_turn_becomes_a_dated_fact_about_the_speaker() -> None:
    fact = only_fact(CAROLINE)
    assert fact.text == (
        "Caroline went to a LGBTQ support group yesterday (7 May 2023) and it was so powerful."
    )


def test_first_person_turn_is_an_experience_of_the_speaker() -> None:
    fact = only_fact(CAROLINE)
    assert (fact.fact_type, fact.who) == ("experience", ["Caroline"])
    assert ExtractedEntity("Caroline", "person") in fact.entities


def test_yesterday_sets_the_occurred_range_to_that_day() -> None:
    fact = only_fact(CAROLINE)
    assert (fact.when, fact.occurred_start, fact.occurred_end) == (
        "yesterday",
        datetime(2023, 5, 7, tzinfo=UTC),
        datetime(2023, 5, 8, tzinfo=UTC),
    )


def test_source_span_points_at_the_sentence_without_the_speaker_prefix() -> None:
    fact = only_fact(CAROLINE)
    assert fact.source_start is not None and fact.source_end is not None
    assert CAROLINE[fact.source_start : fact.source_end] == CAROLINE.removeprefix("Caroline: ")


@pytest.mark.parametrize(
    "text",
    [
        "The cluster had an outage on Tuesday 24 Nov 2026.",
        "The outage was on Tuesday, 24 Nov 2026.",
    ],
)
def test_a_weekday_next_to_its_written_date_gets_no_second_date(text: str) -> None:
    fact = only_fact(text, ItemContext(mentioned_at=datetime(2026, 11, 27, tzinfo=UTC)))
    assert fact.text == text  # was "... on Tuesday (24 November 2026) 24 Nov 2026."
    assert fact.occurred_start == datetime(2026, 11, 24, tzinfo=UTC)


def test_possessive_and_last_week_follow_the_speaker_and_the_rule() -> None:
    fact = only_fact("Melanie: My kids loved the camping trip last week")
    assert fact.text == "Melanie's kids loved the camping trip last week (1–7 May 2023)."
    assert (fact.occurred_start, fact.occurred_end) == (
        datetime(2023, 5, 1, tzinfo=UTC),
        datetime(2023, 5, 8, tzinfo=UTC),
    )


def test_what_leaves_out_the_time_expression() -> None:
    assert only_fact("Melanie: My kids loved the camping trip last week").what == (
        "Melanie's kids loved the camping trip"
    )


@pytest.mark.parametrize(
    "text",
    [
        "Caroline: Hey Mel! Good to see you! How have you been?",
        "Melanie: Thanks!",
        "Melanie: lol",
        "Caroline: Wow, that's great!",
        "Hi!",
        "Thanks, Melanie! That's really sweet.",
    ],
)
def test_greetings_and_filler_make_no_fact(text: str) -> None:
    assert extract(text) == []


def test_speaker_comes_from_item_when_the_text_has_no_prefix() -> None:
    item = ItemContext(mentioned_at=MENTIONED, speaker="Caroline")
    assert only_fact("I'm keen on counseling.", item).text == "Caroline is keen on counseling."


@pytest.mark.parametrize(
    ("said", "written"),
    [
        ("I've got a new job.", "Caroline has got a new job."),
        ("I'll call my sister.", "Caroline will call Caroline's sister."),
        ("I'd love to go again.", "Caroline would love to go again."),
        ("I love painting with my kids.", "Caroline loves painting with Caroline's kids."),
        ("I don't drink coffee.", "Caroline doesn't drink coffee."),
        ("I really try hard.", "Caroline really tries hard."),
        ("The group made me feel accepted.", "The group made Caroline feel accepted."),
        ("We went hiking.", "Caroline and others went hiking."),
        ("I need some me-time.", "Caroline needs some me-time."),
    ],
)
def test_first_person_is_rewritten_readably(said: str, written: str) -> None:
    assert only_fact(f"Caroline: {said}").text == written


def test_i_may_go_is_not_a_date() -> None:
    fact = only_fact("Caroline: I may go to the gym.")
    assert (fact.when, fact.occurred_start, fact.text) == (
        None,
        None,
        "Caroline may go to the gym.",
    )


def test_quoted_title_is_an_entity() -> None:
    fact = only_fact('Caroline: I just finished reading "Becoming Nicole" by Amy Ellis Nutt.')
    assert ExtractedEntity("Becoming Nicole", "title") in fact.entities


def test_author_after_by_is_a_person() -> None:
    fact = only_fact('Caroline: I just finished reading "Becoming Nicole" by Amy Ellis Nutt.')
    assert ExtractedEntity("Amy Ellis Nutt", "person") in fact.entities


def test_multi_word_place_is_an_entity_and_the_where() -> None:
    fact = only_fact("Melanie: We walked through Central Park with my friend Sarah.")
    assert ExtractedEntity("Central Park", "place") in fact.entities
    assert fact.where == "Central Park"


def test_name_after_my_friend_is_a_person_in_who() -> None:
    fact = only_fact("Melanie: We walked through Central Park with my friend Sarah.")
    assert fact.who == ["Melanie", "Sarah"]


def test_gazetteer_city_and_organisation_suffix() -> None:
    fact = only_fact("Caroline: I work at Google Inc. in San Francisco.")
    kinds = {e.name: e.kind for e in fact.entities}
    assert (kinds["Google Inc"], kinds["San Francisco"]) == ("organization", "place")


def test_sentence_initial_common_words_are_not_entities() -> None:
    fact = only_fact("Melanie: Yesterday the painting class at Pottery Club was fun.")
    assert [e.name for e in fact.entities] == ["Pottery Club"]


def test_statement_about_others_is_world() -> None:
    fact = only_fact("Caroline: The transgender stories at the meeting were so inspiring.")
    assert (fact.fact_type, fact.who) == ("world", [])


def test_question_is_not_an_experience() -> None:
    assert only_fact("Melanie: Did my kids tell you about the trip?").fact_type == "world"


def test_sentences_split_around_abbreviations_decimals_and_ellipses() -> None:
    text = "Dr. Smith says I'm fine... I paid $3.50 for it?! I moved to Berlin e.g. last year."
    item = ItemContext(mentioned_at=MENTIONED, speaker="Caroline")
    assert [text[f.source_start : f.source_end] for f in extract(text, item)] == [
        "Dr. Smith says I'm fine...",
        "I paid $3.50 for it?!",
        "I moved to Berlin e.g. last year.",
    ]


def test_each_line_keeps_its_own_speaker() -> None:
    facts = extract("Caroline: I adopted a puppy.\nMelanie: I bought a kiln.")
    assert [f.text for f in facts] == ["Caroline adopted a puppy.", "Melanie bought a kiln."]


def test_a_label_before_a_colon_is_not_a_speaker() -> None:
    item = ItemContext(mentioned_at=MENTIONED, speaker="Caroline")
    assert only_fact("Note: I moved to Berlin.", item).text == "Caroline moved to Berlin."


def test_shared_photo_becomes_a_fact_about_the_speaker() -> None:
    facts = extract("Melanie: Look at this. [shares a photo of a sunset over a lake]")
    assert facts[-1].text == "Melanie shared a photo of a sunset over a lake."


def test_a_sentence_that_does_not_name_its_speaker_is_attributed() -> None:
    facts = extract("Melanie: They were stoked for the dinosaur exhibit! I loved it.")
    assert [f.text for f in facts] == [
        "Melanie: They were stoked for the dinosaur exhibit!",
        "Melanie loved it.",
    ]


def test_because_clause_is_the_why() -> None:
    fact = only_fact("Caroline: I chose them because they help LGBTQ+ folks with adoption.")
    assert fact.why == "they help LGBTQ+ folks with adoption"


def test_so_links_to_the_previous_fact() -> None:
    facts = extract("Caroline: I lost my job last month. So I started painting again.")
    assert [f.causes for f in facts] == [[], [0]]


def test_absolute_date_is_not_repeated_in_the_text() -> None:
    fact = only_fact("Caroline: I moved here on 8 May 2022.")
    assert fact.text == "Caroline moved here on 8 May 2022."
    assert fact.occurred_start == datetime(2022, 5, 8, tzinfo=UTC)


def test_unknown_mention_time_keeps_the_expression_but_no_range() -> None:
    item = ItemContext(mentioned_at=None, speaker="Caroline")
    fact = only_fact("I went to a support group yesterday.", item)
    assert (fact.when, fact.occurred_start, fact.text) == (
        "yesterday",
        None,
        "Caroline went to a support group yesterday.",
    )


def test_text_without_speaker_keeps_first_person_but_is_an_experience() -> None:
    item = ItemContext(mentioned_at=MENTIONED)
    fact = only_fact("I went hiking in the Alps.", item)
    assert (fact.text, fact.fact_type, fact.who) == ("I went hiking in the Alps.", "experience", [])


def test_extraction_is_deterministic() -> None:
    text = (
        "Caroline: I went to a LGBTQ support group yesterday. My friend Sarah came too! "
        'We read "Becoming Nicole" in New York City last spring.'
    )
    assert extract(text) == extract(text)
