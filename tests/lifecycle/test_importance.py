"""Importance at write time: the local cues (a table of cases), the model's 1-10 scaled,
and what retain stores (strength starts at importance, observations inherit)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from engine.errors import InvalidInput
from engine.extraction.llm import parse_facts
from engine.extraction.local import LocalExtractor
from engine.lifecycle.importance import from_scale, local_importance
from engine.lifecycle.policy import resolve_policy
from engine.types import ItemContext

CASES = [
    # (text, entities, lowest, highest)
    ("I prefer short answers without bullet points.", 0, 0.6, 1.0),
    ("We decided to move the launch to March 3, 2025.", 0, 0.7, 1.0),
    ("Alice works at Globex as a data engineer.", 1, 0.6, 1.0),
    ("My daughter's birthday is on 12 June.", 0, 0.6, 1.0),
    ("我决定以后每天早上跑步。", 0, 0.6, 1.0),
    ("我现在搬到上海了。", 0, 0.6, 1.0),
    ("The weather is nice today, haha.", 0, 0.0, 0.25),
    ("Hi! Thanks so much.", 0, 0.0, 0.2),
    ("Did you watch the game?", 0, 0.0, 0.25),
    ("好的，天气不错。", 0, 0.0, 0.25),
    ("The museum has a new wing.", 0, 0.35, 0.5),
    ("Her doctor is Dr. Chen.", 0, 0.55, 1.0),
    ("Tom plays the cello in an orchestra.", 0, 0.55, 1.0),
    ("我的护照明年过期。", 0, 0.55, 1.0),
]


@pytest.mark.parametrize(("text", "entities", "low", "high"), CASES)
def test_local_importance_cues(text: str, entities: int, low: float, high: float) -> None:
    value = local_importance(text, entities)
    assert low <= value <= high, value
    assert value == local_importance(text, entities)  # deterministic


def test_preference_outranks_small_talk() -> None:
    assert local_importance("I love hiking in the Alps.") > local_importance("Nice weather, lol.")


def test_model_scale_maps_to_unit_interval() -> None:
    assert from_scale(1) == 0.1 and from_scale(10) == 1.0 and from_scale(7) == 0.7
    assert from_scale(42) == 1.0 and from_scale(-3) == 0.1 and from_scale(None) is None


def test_llm_answer_importance_is_scaled_and_optional() -> None:
    item = ItemContext(datetime(2025, 5, 1, tzinfo=UTC))
    raw = (
        '{"facts": [{"text": "Sam prefers tea.", "importance": 8},'
        ' {"text": "Sam said hello.", "importance": "2"}, {"text": "Sam is tall."}]}'
    )
    facts = parse_facts(raw, item)
    assert [f.importance for f in facts] == [0.8, 0.2, None]


def test_local_extractor_sets_importance() -> None:
    facts = LocalExtractor().extract(
        "Maya: I decided to quit my job at Initech in May. The weather is nice, haha.",
        ItemContext(datetime(2025, 5, 1, tzinfo=UTC), speaker="Maya"),
    )
    by_text = {f.text: f.importance for f in facts}
    decided = next(v for t, v in by_text.items() if "quit" in t)
    assert decided is not None and decided >= 0.8
    weather = [v for t, v in by_text.items() if "weather" in t]
    assert all(v is not None and v < 0.3 for v in weather)


def test_policy_presets_and_overrides_are_validated() -> None:
    assert resolve_policy("support", {}).decay_rate == 0.98
    assert resolve_policy("assistant", {"archive_threshold": 0.2}).archive_threshold == 0.2
    with pytest.raises(InvalidInput) as bad:
        resolve_policy("assistant", {"decay_rate": 3})
    assert bad.value.field == "lifecycle.decay_rate"
    with pytest.raises(InvalidInput) as unknown:
        resolve_policy("assistant", {"decay": 0.5})
    assert unknown.value.field == "lifecycle.decay"
    with pytest.raises(InvalidInput):
        resolve_policy("archive-everything", {})
