"""Mental models over HTTP: create, read, list, update, delete, and 400/404 on bad input."""

from __future__ import annotations

import httpx
import pytest
from support.operations import finished_operation

from mental_models.mental_models_support import create_model, get_model


async def test_create_read_list_update_delete(api: httpx.AsyncClient, bank_id: str) -> None:
    base = f"/v1/default/banks/{bank_id}/mental-models"
    created = await create_model(
        api,
        bank_id,
        id="team-stack",
        name="Team stack",
        source_query="Which database does the team use?",
        tags=["eng"],
        max_tokens=1024,
        trigger={"refresh_after_consolidation": True},
    )
    assert created["mental_model_id"] == "team-stack"
    operation = await finished_operation(api, bank_id, created["operation_id"])
    assert operation["status"] == "completed"
    assert operation["task_type"] == "refresh_mental_model"

    model = await get_model(api, bank_id, "team-stack")
    assert model["name"] == "Team stack"
    assert model["tags"] == ["eng"] and model["max_tokens"] == 1024
    assert model["trigger"]["refresh_after_consolidation"] is True
    assert model["trigger"]["mode"] == "full"
    assert model["version"] == 1 and model["content"].startswith("Which database")
    assert "reflect_response" in model

    await create_model(api, bank_id, id="other", name="Other", source_query="Q", tags=["ops"])
    listed = (await api.get(base, params={"tags": "eng", "tags_match": "all_strict"})).json()
    assert [m["id"] for m in listed["items"]] == ["team-stack"]
    assert listed["total"] == 1 and "content" not in listed["items"][0]
    everything = (await api.get(base, params={"detail": "content", "limit": 1})).json()
    assert everything["total"] == 2 and len(everything["items"]) == 1
    assert "content" in everything["items"][0]

    patched = await api.patch(
        f"{base}/team-stack",
        json={"name": "Stack", "trigger": {"mode": "delta"}, "source_query": None, "tags": None},
    )
    assert patched.status_code == 200, patched.text
    assert patched.json()["name"] == "Stack"
    assert patched.json()["source_query"] == "Which database does the team use?"
    # The trigger is a patch: the stored refresh_after_consolidation stays.
    assert patched.json()["trigger"]["refresh_after_consolidation"] is True
    assert patched.json()["trigger"]["mode"] == "delta"

    assert (await api.delete(f"{base}/team-stack")).status_code == 200
    assert (await api.get(f"{base}/team-stack")).status_code == 404
    assert (await api.get(base)).json()["total"] == 1


async def test_a_duplicate_id_is_a_conflict(api: httpx.AsyncClient, bank_id: str) -> None:
    await create_model(api, bank_id, id="dup", name="A", source_query="Q")
    response = await api.post(
        f"/v1/default/banks/{bank_id}/mental-models",
        json={"id": "dup", "name": "B", "source_query": "Q"},
    )
    assert response.status_code == 409


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (
            {"name": "N", "source_query": "Q", "trigger": {"refresh_cron": "every night"}},
            "trigger.refresh_cron",
        ),
        (
            {"name": "N", "source_query": "Q", "trigger": {"refresh_cron": "0 25 * * *"}},
            "trigger.refresh_cron",
        ),
        ({"name": "N", "source_query": "Q", "max_tokens": 100}, "max_tokens"),
        ({"name": "N", "source_query": "Q", "max_tokens": 9000}, "max_tokens"),
        ({"name": "N", "source_query": "Q", "id": "Not Valid"}, "id"),
        ({"name": "N", "source_query": "Q", "trigger": {"mode": "weird"}}, "trigger.mode"),
        (
            {"name": "N", "source_query": "Q", "trigger": {"min_refresh_interval_seconds": -1}},
            "trigger.min_refresh_interval_seconds",
        ),
        ({"name": "N", "source_query": "  "}, "source_query"),
        ({"source_query": "Q"}, "name"),
        ({"name": "N", "source_query": "Q", "questions": ["a"]}, "questions"),
        ({"name": "N", "kind": "report", "questions": []}, "questions"),
        # A question is a reflect query: no longer than one (a 2,000,000-character one left
        # its refresh failing forever on Temporal's 2 MB payload limit).
        ({"name": "N", "source_query": "Q" * 2001}, "source_query"),
        ({"name": "N", "kind": "report", "questions": ["Q" * 2001]}, "questions.0"),
        ({"name": "N", "kind": "report", "questions": ["Q"] * 51}, "questions"),
        ({"name": "N", "source_query": "Q", "tags": ["t"] * 101}, "tags"),
        ({"name": "N", "source_query": "Q", "tags": ["t" * 201]}, "tags.0"),
    ],
)
async def test_bad_input_is_a_400_naming_the_field(
    api: httpx.AsyncClient, bank_id: str, body: dict[str, object], field: str
) -> None:
    response = await api.post(f"/v1/default/banks/{bank_id}/mental-models", json=body)
    assert response.status_code == 400, response.text
    assert response.json()["field"] == field


async def test_unknown_model_is_a_404(api: httpx.AsyncClient, bank_id: str) -> None:
    created = await create_model(api, bank_id, id="known", name="N", source_query="Q")
    await finished_operation(api, bank_id, created["operation_id"])  # its first refresh is done
    base = f"/v1/default/banks/{bank_id}/mental-models/unknown"
    assert (await api.get(base)).status_code == 404
    assert (await api.patch(base, json={"name": "x"})).status_code == 404
    assert (await api.delete(base)).status_code == 404
    assert (await api.post(base + "/refresh")).status_code == 404
    assert (await api.post(base + "/clear")).status_code == 404
    assert (await api.get(base + "/history")).status_code == 404
    assert (await api.post(base + "/dry-run-refresh")).status_code == 404
    known = f"/v1/default/banks/{bank_id}/mental-models/known"
    before = await get_model(api, bank_id, "known")
    preview = await api.post(known + "/dry-run-refresh")
    assert preview.status_code == 200, preview.text
    body = preview.json()
    assert body["mental_model_id"] == "known" and body["effective_mode"] == "full"
    assert body["current_content"] == before["content"]
    assert body["would_persist"] == (body["outcome"] == "content_written")
    after = await get_model(api, bank_id, "known")
    assert after["content"] == before["content"]  # a preview stores nothing


async def test_a_bad_cron_on_update_leaves_the_model_unchanged(
    api: httpx.AsyncClient, bank_id: str
) -> None:
    await create_model(api, bank_id, id="m", name="N", source_query="Q")
    url = f"/v1/default/banks/{bank_id}/mental-models/m"
    response = await api.patch(url, json={"name": "New", "trigger": {"refresh_cron": "61 * * * *"}})
    assert response.status_code == 400 and response.json()["field"] == "trigger.refresh_cron"
    model = await get_model(api, bank_id, "m")
    assert model["name"] == "N" and model["schedule_id"] is None


async def test_a_report_keeps_its_questions_and_can_change_them(
    api: httpx.AsyncClient, bank_id: str
) -> None:
    await create_model(api, bank_id, id="r", name="R", kind="report", questions=["A?", "B?"])
    await create_model(api, bank_id, id="m", name="M", source_query="Q")
    url = f"/v1/default/banks/{bank_id}/mental-models"
    reports = (await api.get(url, params={"kind": "report"})).json()["items"]
    assert [r["id"] for r in reports] == ["r"] and reports[0]["questions"] == ["A?", "B?"]

    patched = await api.patch(f"{url}/r", json={"questions": ["C?"]})
    assert patched.status_code == 200, patched.text
    assert patched.json()["questions"] == ["C?"] and patched.json()["source_query"] == "C?"
    refused = await api.patch(f"{url}/m", json={"questions": ["C?"]})
    assert refused.status_code == 400 and refused.json()["field"] == "questions"
