"""The `engram` command line against the real API, served on a loopback port with a worker."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

import pytest
from support.cli import engram

from engram.cli import build_parser

COMMANDS = [
    ["up"],
    ["status"],
    ["banks"],
    ["banks", "list"],
    ["banks", "create"],
    ["banks", "show"],
    ["banks", "delete"],
    ["retain"],
    ["recall"],
    ["reflect"],
    ["import"],
    ["export"],
    ["documents"],
    ["entities"],
    ["forget"],
    ["memories"],
    ["memories", "edit"],
]


def chat(conversations: int, days: int) -> str:
    lines = []
    for c in range(conversations):
        for d in range(days):
            stamp = f"2024-05-{10 + d:02d}T09:00:00Z"
            lines.append(
                {
                    "conversation_id": f"c{c}",
                    "role": "user",
                    "content": f"I visited Lisbon with Ana on trip {c} and saw {d + 3} castles.",
                    "timestamp": stamp,
                }
            )
            lines.append(
                {
                    "conversation_id": f"c{c}",
                    "speaker": "Ana",
                    "content": f"I bought a blue scarf in Porto on day {d} of trip {c}.",
                    "timestamp": stamp,
                }
            )
    return "\n".join(json.dumps(line) for line in lines)


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_every_command_has_help_with_examples(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args([*command, "--help"])
    assert exited.value.code == 0
    assert "examples:\n  engram " + command[0] in capsys.readouterr().out


async def test_banks_retain_recall_documents_and_entities(
    url: str, bank_id: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert await engram("banks", "create", bank_id, "--name", "Test bank") == 0
    assert f"bank {bank_id} ready" in capsys.readouterr().out
    note = tmp_path / "note.md"
    note.write_text("Caroline: I went to a LGBTQ support group yesterday.")
    assert (
        await engram(
            "retain", "--bank", bank_id, "--file", str(note), "--timestamp", "2023-05-08T13:56:00Z"
        )
        == 0
    )
    assert "facts added" in capsys.readouterr().out
    assert await engram("recall", "--bank", bank_id, "support group") == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["DATE", "TYPE", "SCORE", "TEXT"]
    assert lines[1].startswith("2023-05-07") and "support group" in lines[1], lines
    assert await engram("recall", "--bank", bank_id, "support group", "--json") == 0
    answer = json.loads(capsys.readouterr().out)
    assert "support group" in answer["results"][0]["text"]
    assert await engram("documents", "--bank", bank_id) == 0
    assert "UPDATED" in capsys.readouterr().out
    assert await engram("entities", "--bank", bank_id) == 0
    assert "Caroline" in capsys.readouterr().out
    assert await engram("banks", "show", bank_id) == 0
    shown = capsys.readouterr().out
    assert "Test bank" in shown and "facts" in shown
    assert await engram("banks", "list") == 0
    assert bank_id in capsys.readouterr().out
    assert await engram("banks", "delete", bank_id, "--yes") == 0
    assert await engram("banks", "show", bank_id) == 1
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and error.startswith("engram: ") and "404" in error


async def test_import_shows_progress_and_a_summary_and_export_reads_back(
    url: str, bank_id: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    source = tmp_path / "chat.jsonl"
    source.write_text(chat(conversations=2, days=3) + "\n{broken\n")
    assert await engram("import", str(source), "--bank", bank_id) == 0
    out = capsys.readouterr().out
    assert "2 documents, 12 items (jsonl)" in out
    assert "skipped chat.jsonl line 13: not valid JSON" in out
    assert "documents 2/2" in out and "items 12/12" in out and "facts " in out
    assert "imported 2 documents, 12 items: " in out and "items/s" in out
    exported = tmp_path / "export.jsonl"
    assert await engram("export", "--bank", bank_id, "-o", str(exported)) == 0
    assert await engram("import", str(exported), "--bank", f"{bank_id}-copy") == 0
    capsys.readouterr()
    assert await engram("export", "--bank", f"{bank_id}-copy") == 0
    assert capsys.readouterr().out == exported.read_text()


async def test_a_folder_of_notes_imports_one_document_per_file(
    url: str, bank_id: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "notes" / "2024").mkdir(parents=True)
    (tmp_path / "notes" / "a.md").write_text("# Alice\n\nAlice moved to Lisbon in 2019.")
    (tmp_path / "notes" / "2024" / "b.txt").write_text("Bob adopted a beagle named Pixel.")
    (tmp_path / "notes" / "photo.png").write_bytes(b"\x89PNG")
    assert await engram("import", str(tmp_path / "notes"), "--bank", bank_id) == 0
    capsys.readouterr()
    assert await engram("documents", "--bank", bank_id) == 0
    out = capsys.readouterr().out
    assert "a.md" in out and "2024/b.txt" in out and "photo" not in out


async def test_errors_exit_non_zero_with_one_line(
    url: str, bank_id: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert await engram("recall", "anything") == 2
    assert (
        capsys.readouterr().err
        == "engram: engram recall: --bank is required (or set ENGRAM_BANK)\n"
    )
    assert await engram("import", str(tmp_path / "missing.json"), "--bank", bank_id) == 2
    assert capsys.readouterr().err.endswith("missing.json: no such file\n")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"role": "user", "content": "hi"}\n{oops\n')
    assert await engram("import", str(bad), "--bank", bank_id, "--on-error", "stop") == 1
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "bad.jsonl line 2" in error
    assert await engram("status", "--url", "http://127.0.0.1:9") == 1
    assert "cannot reach Engram" in capsys.readouterr().err


async def test_ctrl_c_detaches_and_import_status_reattaches(
    url: str, bank_id: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    source = tmp_path / "big.jsonl"
    source.write_text(chat(conversations=12, days=6))
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "engram.cli",
        "import",
        str(source),
        "--bank",
        bank_id,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "ENGRAM_URL": url},
    )
    assert process.stdout is not None
    first = (await asyncio.wait_for(process.stdout.readline(), 60)).decode()
    assert first.startswith("import ") and "12 documents" in first, first
    operation_id = first.split()[1]
    # Its first progress line: it is watching now (a fixed pause assumed it would be by then).
    watching = (await asyncio.wait_for(process.stdout.readline(), 60)).decode()
    assert "documents" in watching and "100%" not in watching, watching
    process.send_signal(signal.SIGINT)
    rest, errors = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, errors.decode()
    assert f"Re-attach with: engram import status {operation_id}" in rest.decode()
    assert await engram("import", "status", operation_id) == 0
    out = capsys.readouterr().out
    assert "imported 12 documents, 144 items" in out
