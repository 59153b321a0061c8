"""`engram forget` (dry run by default, then --yes) and `engram memories edit`."""

from __future__ import annotations

import json

import pytest
from support.cli import engram


async def test_forget_lists_first_then_forgets_and_edit_corrects(
    url: str, bank_id: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await engram("retain", "--bank", bank_id, "Pim keeps bees in Utrecht.") == 0
    assert await engram("retain", "--bank", bank_id, "Pim's car is a red Fiat.") == 0
    capsys.readouterr()
    assert await engram("forget", "--bank", bank_id, "--text", "bees") == 0
    listed = capsys.readouterr().out
    assert "would forget 1 memories" in listed and "add --yes" in listed
    assert await engram("forget", "--bank", bank_id, "--text", "bees", "--yes") == 0
    assert "forgot 1 memories" in capsys.readouterr().out
    assert await engram("recall", "--bank", bank_id, "Pim", "--json") == 0
    results = json.loads(capsys.readouterr().out)["results"]
    assert [r["text"] for r in results] == ["Pim's car is a red Fiat."]
    memory_id = results[0]["id"]
    assert (
        await engram(
            "memories", "edit", "--bank", bank_id, memory_id, "--text", "Pim's car is a blue Fiat."
        )
        == 0
    )
    assert "blue Fiat" in capsys.readouterr().out
    edit = ("memories", "edit", "--bank", bank_id, memory_id)
    assert await engram(*edit, "--entity", "Pim", "--entity", "Fiat", "--literal-entities") == 0
    capsys.readouterr()
    assert await engram("recall", "--bank", bank_id, "Pim's car", "--json") == 0
    [car] = json.loads(capsys.readouterr().out)["results"]
    assert sorted(car["entities"]) == ["Fiat", "Pim"]
    assert await engram("forget", "--bank", bank_id) == 2  # nothing named: a usage error
    assert "say what to forget" in capsys.readouterr().err
