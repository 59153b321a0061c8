"""`engram reflect` against the real API (no LLM key: the answer lists the evidence)."""

from __future__ import annotations

import json

import pytest
from support.cli import engram


async def test_reflect_prints_the_answer_and_its_evidence(
    url: str, bank_id: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await engram("banks", "create", bank_id) == 0
    assert (
        await engram(
            "retain",
            "--bank",
            bank_id,
            "Caroline: I went to a support group yesterday.",
            "--timestamp",
            "2023-05-08T13:56:00Z",
        )
        == 0
    )
    capsys.readouterr()
    assert await engram("reflect", "--bank", bank_id, "support group", "--budget", "low") == 0
    out = capsys.readouterr().out
    assert out.startswith("No language model is configured")
    based_on = out.split("\nbased on:\n", 1)[1].splitlines()
    assert based_on[0].split() == ["TYPE", "ID", "TEXT"]
    assert "support group" in based_on[1]

    assert await engram("reflect", "--bank", bank_id, "support group", "--json") == 0
    answer = json.loads(capsys.readouterr().out)
    assert "support group" in answer["based_on"]["memories"][0]["text"]

    assert await engram("reflect", "anything") == 2
    assert "--bank is required" in capsys.readouterr().err
