"""Chunking: conversation awareness, size limits, and ids that survive local edits."""

from __future__ import annotations

import hashlib
import json
import random
import re

import pytest

from engine.chunking import Chunk, chunk_content
from engine.errors import InvalidInput

WORDS = [
    "the",
    "memory",
    "agent",
    "kept",
    "a",
    "note",
    "about",
    "paris",
    "tea",
    "alice",
    "bob",
    "meeting",
    "project",
    "deadline",
    "coffee",
    "garden",
    "river",
    "mountain",
    "city",
    "train",
    "friday",
    "budget",
    "report",
    "lunch",
    "museum",
    "concert",
]


def paragraphs(count: int, seed: int) -> list[str]:
    """Prose paragraphs of 150-500 characters, each a few sentences."""
    rng = random.Random(seed)
    result: list[str] = []
    for _ in range(count):
        sentences: list[str] = []
        length = rng.randrange(150, 500)
        while sum(len(s) + 1 for s in sentences) < length:
            words = [rng.choice(WORDS) for _ in range(rng.randrange(5, 14))]
            sentences.append(" ".join(words).capitalize() + ".")
        result.append(" ".join(sentences))
    return result


def ids(chunks: list[Chunk]) -> list[str]:
    return [chunk.chunk_id for chunk in chunks]


def test_json_turns_become_speaker_lines() -> None:
    turns = [
        {"speaker": "Alice", "content": "I moved to Lisbon last spring."},
        {"role": "assistant", "text": "How do you like it?"},
        {"name": "Alice", "message": "The light is wonderful."},
    ]
    chunks = chunk_content("doc", json.dumps(turns))
    assert [chunk.text for chunk in chunks] == [
        "Alice: I moved to Lisbon last spring.\n"
        "assistant: How do you like it?\n"
        "Alice: The light is wonderful."
    ]


def test_json_turn_spans_cover_their_objects() -> None:
    content = json.dumps(
        [{"speaker": "Ana", "content": "Hi."}, {"speaker": "Ben", "content": "Yo."}]
    )
    (chunk,) = chunk_content("doc", content)
    assert json.loads("[" + content[chunk.char_start : chunk.char_end] + "]") == json.loads(content)


def test_jsonl_turns_become_speaker_lines() -> None:
    lines = [
        {"speaker": "Ana", "content": "I play cello."},
        {"role": "user", "content": "Since when?"},
    ]
    content = json.dumps(lines[0]) + "\n\n" + json.dumps(lines[1]) + "\n"
    chunks = chunk_content("doc", content)
    assert [chunk.text for chunk in chunks] == ["Ana: I play cello.\nuser: Since when?"]


def test_turns_are_never_split_between_chunks() -> None:
    turns = [
        {"speaker": f"Person{i % 3}", "content": " ".join(paragraphs(1, seed=i))} for i in range(30)
    ]
    chunks = chunk_content("doc", json.dumps(turns), max_chars=1000)
    lines = [line for chunk in chunks for line in chunk.text.split("\n")]
    assert lines == [f"{turn['speaker']}: {turn['content']}" for turn in turns]
    assert all(len(chunk.text) <= 1000 for chunk in chunks)


def test_transcript_single_turn_chunks_name_their_speaker() -> None:
    talk = paragraphs(6, seed=3)
    speakers = ["Alice", "Bob"] * 3
    content = "\n".join(f"{who}: {text}" for who, text in zip(speakers, talk, strict=True))
    chunks = chunk_content("doc", content, max_chars=520)
    assert len(chunks) == 6
    assert [chunk.speaker for chunk in chunks] == speakers
    assert [chunk.text for chunk in chunks] == content.split("\n")


def test_transcript_chunk_with_several_speakers_has_no_speaker() -> None:
    content = "Alice: Hi Bob.\nBob: Hi Alice.\nAlice: Lunch on Friday?\nBob: Sure."
    (chunk,) = chunk_content("doc", content)
    assert chunk.speaker is None
    assert chunk.text == content


def test_transcript_continuation_lines_stay_with_their_turn() -> None:
    content = "Alice: I have two cats.\nthey are both grey\nBob: Nice.\nAlice: Yes."
    (chunk,) = chunk_content("doc", content)
    assert chunk.text == content


def test_key_value_lines_are_not_a_transcript() -> None:
    content = "Name: John Smith\nCity: Paris\nEmployer: Acme\nRole: Engineer"
    (chunk,) = chunk_content("doc", content)
    assert chunk.speaker is None
    assert chunk.text == content
    assert (chunk.char_start, chunk.char_end) == (0, len(content))


def test_long_turn_is_split_and_every_piece_keeps_the_speaker() -> None:
    speech = " ".join(paragraphs(5, seed=4))
    content = json.dumps([{"speaker": "Carol", "content": speech}])
    chunks = chunk_content("doc", content, max_chars=400)
    assert len(chunks) > 1
    assert all(chunk.speaker == "Carol" for chunk in chunks)
    assert all(len(chunk.text) <= 400 for chunk in chunks)
    pieces = [line.removeprefix("Carol: ") for chunk in chunks for line in chunk.text.split("\n")]
    assert " ".join(pieces) == speech


def test_paragraphs_are_packed_in_order_within_the_limit() -> None:
    paras = paragraphs(30, seed=5)
    content = "\n\n".join(paras)
    chunks = chunk_content("doc", content, max_chars=1200)
    assert 1 < len(chunks) < 30
    assert all(len(chunk.text) <= 1200 for chunk in chunks)
    assert [p for chunk in chunks for p in chunk.text.split("\n\n")] == paras


def test_long_paragraph_splits_at_sentence_ends() -> None:
    paragraph = " ".join(paragraphs(8, seed=6))
    chunks = chunk_content("doc", paragraph, max_chars=300)
    assert len(chunks) > 1
    assert all(chunk.text.endswith(".") for chunk in chunks)
    assert " ".join(chunk.text for chunk in chunks) == paragraph


def test_long_sentence_wraps_at_word_boundaries() -> None:
    rng = random.Random(7)
    words = [rng.choice(WORDS) + str(rng.randrange(1000)) for _ in range(400)]
    sentence = " ".join(words)
    chunks = chunk_content("doc", sentence, max_chars=200)
    assert all(len(chunk.text) <= 200 for chunk in chunks)
    assert [word for chunk in chunks for word in chunk.text.split(" ")] == words


def test_word_longer_than_the_limit_is_cut_as_a_last_resort() -> None:
    blob = "x" * 450
    chunks = chunk_content("doc", f"see {blob} here", max_chars=200)
    assert all(len(chunk.text) <= 200 for chunk in chunks)
    assert "".join(chunk.text for chunk in chunks).replace(" ", "") == f"see{blob}here"


def test_heading_starts_a_new_chunk() -> None:
    intro = "\n\n".join(paragraphs(3, seed=8))
    body = "\n\n".join(paragraphs(2, seed=9))
    content = f"{intro}\n\n## Travel plans\n{body}"
    chunks = chunk_content("doc", content, max_chars=3000)
    assert [chunk.text for chunk in chunks] == [intro, f"## Travel plans\n{body}"]


def test_chunking_is_deterministic() -> None:
    content = "\n\n".join(paragraphs(40, seed=10))
    assert chunk_content("doc", content, 800) == chunk_content("doc", content, 800)


def test_ids_are_content_addressed() -> None:
    content = "\n\n".join(paragraphs(10, seed=11))
    for chunk in chunk_content("doc", content, 600):
        key = hashlib.sha256(len(b"doc").to_bytes(8, "big") + b"doc" + chunk.text.encode())
        assert chunk.chunk_id == f"c_{key.hexdigest()[:16]}"
        assert chunk.content_hash == hashlib.sha256(chunk.text.encode()).hexdigest()


def test_ids_differ_between_documents() -> None:
    content = "\n\n".join(paragraphs(10, seed=12))
    assert not set(ids(chunk_content("a", content, 600))) & set(
        ids(chunk_content("b", content, 600))
    )


def test_repeated_text_gets_unique_ids() -> None:
    paragraph = paragraphs(1, seed=13)[0]
    content = "\n\n".join([paragraph] * 4)
    chunks = chunk_content("doc", content, max_chars=len(paragraph) + 1)
    assert len(chunks) == 4
    first = chunks[0].chunk_id
    assert ids(chunks) == [first, f"{first}_2", f"{first}_3", f"{first}_4"]


def test_editing_one_paragraph_changes_at_most_two_ids() -> None:
    """40 edits (one paragraph grown or shrunk) of one fixed document; greedy packing fails
    15 of them. The bound is not a guarantee: over 90 other such documents (3,600 edits,
    max_chars 1000-3000) it held for 98.4% of edits, and for 62% with greedy packing."""
    paras = paragraphs(40, seed=16)
    before = set(ids(chunk_content("doc", "\n\n".join(paras), max_chars=1500)))
    for edited in range(10, 30):
        grown, shrunk = list(paras), list(paras)
        grown[edited] += " Later that evening the whole team walked to the river to talk budgets."
        shrunk[edited] = shrunk[edited].split(". ")[0] + "."
        for changed in (grown, shrunk):
            after = ids(chunk_content("doc", "\n\n".join(changed), max_chars=1500))
            assert len(set(after) - before) <= 2, edited


def test_inserting_a_paragraph_at_the_start_keeps_later_ids() -> None:
    paras = paragraphs(40, seed=15)
    before = ids(chunk_content("doc", "\n\n".join(paras), max_chars=1500))
    opening = paragraphs(1, seed=99)[0]
    after = set(ids(chunk_content("doc", "\n\n".join([opening, *paras]), max_chars=1500)))
    assert len([chunk_id for chunk_id in before if chunk_id not in after]) <= 1


def test_plain_text_spans_slice_the_original_exactly() -> None:
    content = "  \n# Notes\n" + "\n\n\n".join(paragraphs(20, seed=16)) + "\n  \n"
    chunks = chunk_content("doc", content, max_chars=700)
    assert all(content[c.char_start : c.char_end] == c.text for c in chunks)
    assert re.sub(r"\s+", "", "".join(c.text for c in chunks)) == re.sub(r"\s+", "", content)


def test_whitespace_content_gives_no_chunks() -> None:
    assert chunk_content("doc", " \n\t\n ") == []


def test_invalid_json_starting_with_a_bracket_is_plain_text() -> None:
    content = "[draft] Alice said the budget is due on Friday."
    (chunk,) = chunk_content("doc", content)
    assert chunk.text == content


def test_json_list_of_non_turns_is_plain_text() -> None:
    content = json.dumps([1, 2, {"x": 3}])
    (chunk,) = chunk_content("doc", content)
    assert chunk.text == content


def test_limit_below_200_is_rejected() -> None:
    with pytest.raises(InvalidInput) as caught:
        chunk_content("doc", "text", max_chars=199)
    assert caught.value.field == "chunk_size"
