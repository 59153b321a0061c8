"""prefer_observations with Hindsight's meaning: the raw facts a returned observation was
built from leave the answer, and the next candidates take their budget."""

from __future__ import annotations

from engine.recall.budget import fill_budget, fill_preferring_observations

Item = tuple[str, bool, int]  # id, is an observation, tokens


def fill(items: list[Item], evidence: dict[str, list[str]], budget: int) -> list[str]:
    kept, _ = fill_preferring_observations(
        items, lambda i: i[0], lambda i: i[1], evidence, lambda i: i[2], budget
    )
    return [i[0] for i in kept]


def test_covered_facts_are_dropped_and_their_slots_backfilled() -> None:
    items: list[Item] = [
        ("o1", True, 10),
        ("f1", False, 10),
        ("f2", False, 10),
        ("f3", False, 10),
        ("o2", True, 10),
        ("f4", False, 10),
    ]
    evidence = {"o1": ["f1", "f2"], "o2": ["f3"]}
    assert [i[0] for i in fill_budget(items, lambda i: i[2], 30)[0]] == ["o1", "f1", "f2"]
    # f1, f2 drop for o1; f3 comes in, then o2 (backfilled) drops f3 as well; f4 fills.
    assert fill(items, evidence, 30) == ["o1", "o2", "f4"]


def test_facts_of_observations_left_out_stay() -> None:
    items: list[Item] = [("f1", False, 10), ("f2", False, 10), ("o1", True, 10)]
    # o1 does not fit the budget, so the facts it was built from are the answer.
    assert fill(items, {"o1": ["f1", "f2"]}, 20) == ["f1", "f2"]
    assert fill(items, {}, 30) == ["f1", "f2", "o1"]
