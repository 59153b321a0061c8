"""Correction and erasure over HTTP: forget leaves no trace in any table and a tombstone
keeps a re-sent document from bringing it back; dry runs change nothing; PATCH corrects and
versions a fact; feedback moves importance within bounds."""

from __future__ import annotations

from typing import Any

import httpx
from support.operations import consolidated

from engine.db import Pool

BASE = "/v1/default/banks"
SECRET = "Zorblatt"  # unique: appears nowhere but in what the test retains

DOCUMENT = {
    "document_id": "diary",
    "timestamp": "2025-04-02T10:00:00Z",
    "content": (
        "Nadia: I adopted a dog named Zorblatt last week. "
        "Nadia: I also started a pottery class on Tuesdays. "
        "Nadia: My sister Ines lives in Madrid."
    ),
}


async def retain(api: httpx.AsyncClient, bank: str, items: list[dict[str, Any]]) -> list[str]:
    """Retain synchronously; the ids of the facts now stored for these documents."""
    response = await api.post(f"{BASE}/{bank}/memories", json={"items": items})
    assert response.status_code == 200, response.text
    ids: list[str] = []
    for document_id in response.json()["document_ids"]:
        listed = await api.get(f"{BASE}/{bank}/memories/list", params={"document_id": document_id})
        ids += [item["id"] for item in listed.json()["items"]]
    return ids


async def rows_mentioning(pool: Pool, needle: str) -> dict[str, int]:
    """Every table of the database, every column cast to text, searched for `needle`."""
    found: dict[str, int] = {}
    async with pool.acquire() as conn:
        tables = await conn.fetch(
            "SELECT quote_ident(table_schema) || '.' || quote_ident(table_name) AS name"
            " FROM information_schema.tables"
            " WHERE table_schema NOT IN ('pg_catalog', 'information_schema')"
            " AND table_type = 'BASE TABLE'"
        )
        for table in tables:
            count = await conn.fetchval(
                f"SELECT count(*) FROM {table['name']} t WHERE t::text ILIKE $1",
                f"%{needle}%",
            )
            if count:
                found[table["name"]] = int(count)
    return found


async def forget(api: httpx.AsyncClient, bank: str, **body: Any) -> dict[str, Any]:
    response = await api.post(f"{BASE}/{bank}/forget", json=body)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


async def test_forget_leaves_no_trace_and_stays_forgotten(
    api: httpx.AsyncClient, pool: Pool, bank_id: str
) -> None:
    await retain(api, bank_id, [DOCUMENT])
    await consolidated(api, bank_id)
    needle = SECRET.lower()[:7]  # also catches the stemmed BM25 term
    before = await rows_mentioning(pool, needle)
    assert "public.memory_units" in before and "public.chunks" in before, before
    assert "public.bank_term_stats" in before and "public.documents" in before, before

    dry = await forget(api, bank_id, text=SECRET, dry_run=True)
    assert dry["dry_run"] and dry["deleted_count"] >= 1
    assert all(SECRET in m["text"] or m["collateral"] for m in dry["memories"])
    assert await rows_mentioning(pool, needle) == before  # a dry run changes nothing

    done = await forget(api, bank_id, text=SECRET)
    assert [m["id"] for m in done["memories"]] == [m["id"] for m in dry["memories"]]
    assert await rows_mentioning(pool, needle) == {}
    # The rest of the document is still remembered, its chunk still holds the rest.
    listed = await api.get(f"{BASE}/{bank_id}/memories/list")
    texts = [i["text"] for i in listed.json()["items"]]
    assert any("pottery" in t for t in texts) and any("Madrid" in t for t in texts)

    # Re-sending the same document does not bring the forgotten fact back.
    await retain(api, bank_id, [DOCUMENT])
    assert await rows_mentioning(pool, needle) == {}
    # Nor does the same sentence in a new document.
    await retain(api, bank_id, [{**DOCUMENT, "document_id": "copy"}])
    assert await rows_mentioning(pool, needle) == {}
    recalled = await api.post(
        f"{BASE}/{bank_id}/memories/recall", json={"query": "Nadia's dog", "budget": "low"}
    )
    assert SECRET not in recalled.text


async def test_forget_by_entity_and_delete_one(
    api: httpx.AsyncClient, pool: Pool, bank_id: str
) -> None:
    ids = await retain(
        api,
        bank_id,
        [
            {"document_id": "a", "content": "Quentaris Voss joined the rowing club."},
            {"document_id": "b", "content": "Quentaris Voss moved to Ghent in 2024."},
            {"document_id": "c", "content": "The rowing club meets on Saturdays."},
        ],
    )
    assert len(ids) == 3
    result = await forget(api, bank_id, entity="Quentaris Voss")
    assert result["deleted_count"] == 2 and "Quentaris Voss" in result["entities_removed"]
    assert await rows_mentioning(pool, "quentaris") == {}
    listed = (await api.get(f"{BASE}/{bank_id}/memories/list")).json()
    assert [i["text"] for i in listed["items"]] == ["The rowing club meets on Saturdays."]
    last = listed["items"][0]["id"]
    deleted = await api.delete(f"{BASE}/{bank_id}/memories/{last}")
    assert deleted.status_code == 200 and deleted.json()["deleted_count"] == 1
    assert (await api.get(f"{BASE}/{bank_id}/memories/{last}")).status_code == 404
    assert (await api.delete(f"{BASE}/{bank_id}/memories/{last}")).status_code == 404
    empty = await api.post(f"{BASE}/{bank_id}/forget", json={})
    assert empty.status_code == 400 and empty.json()["field"] == "filter"
    unknown = await api.post(f"{BASE}/{bank_id}/forget", json={"entity": "Nobody Atall"})
    assert unknown.status_code == 404


async def test_patch_corrects_and_versions_a_fact(
    api: httpx.AsyncClient, pool: Pool, bank_id: str
) -> None:
    [fact] = await retain(
        api, bank_id, [{"document_id": "d", "content": "Omar's flight lands at 9 pm."}]
    )
    url = f"{BASE}/{bank_id}/memories/{fact}"
    lengths = (
        "SELECT s.total_terms, m.token_count FROM bank_stats s"
        " JOIN memory_units m ON m.bank_id = s.bank_id WHERE m.id = $1"
    )
    async with pool.acquire() as conn:
        before = await conn.fetchrow(lengths, fact)
    patched = await api.patch(
        url,
        json={
            "text": "Omar's delayed flight lands at 11 pm.",
            "reason": "delayed",
            "tags": ["trip"],
        },
    )
    assert patched.status_code == 200, patched.text
    async with pool.acquire() as conn:
        after = await conn.fetchrow(lengths, fact)
    # BM25's average length: the bank's total follows the corrected fact's new length.
    assert before is not None and after is not None
    assert after["token_count"] != before["token_count"]
    assert after["total_terms"] - before["total_terms"] == (
        after["token_count"] - before["token_count"]
    )
    assert patched.json()["text"] == "Omar's delayed flight lands at 11 pm."
    recalled = await api.post(
        f"{BASE}/{bank_id}/memories/recall", json={"query": "When does Omar land?"}
    )
    assert recalled.json()["results"][0]["text"] == "Omar's delayed flight lands at 11 pm."
    async with pool.acquire() as conn:
        terms = {
            r["term"]
            for r in await conn.fetch("SELECT term FROM memory_terms WHERE unit_id = $1", fact)
        }
    assert "11" in terms and "9" not in terms
    history = (await api.get(f"{url}/history")).json()
    assert history[0]["change"] == "corrected"
    assert history[0]["previous_text"] == "Omar's flight lands at 9 pm."
    assert history[0]["reason"] == "delayed"
    invalidated = await api.patch(url, json={"state": "invalidated"})
    assert invalidated.status_code == 200 and invalidated.json()["state"] == "invalidated"
    gone = await api.post(f"{BASE}/{bank_id}/memories/recall", json={"query": "Omar flight"})
    assert fact not in [r["id"] for r in gone.json()["results"]]
    bad = await api.patch(url, json={"state": "forgotten"})
    assert bad.status_code == 400 and bad.json()["field"] == "state"
    nothing = await api.patch(url, json={})
    assert nothing.status_code == 400


async def test_patch_replaces_a_facts_entities(
    api: httpx.AsyncClient, pool: Pool, bank_id: str
) -> None:
    [omar, layla] = await retain(
        api,
        bank_id,
        [
            {"document_id": "a", "content": "Omar booked the flight to Lisbon."},
            {"document_id": "b", "content": "Layla lives in Cairo."},
        ],
    )
    url = f"{BASE}/{bank_id}/memories/{omar}"
    assert "Lisbon" in (await api.get(url)).json()["entities"]
    patched = await api.patch(url, json={"entities": ["cairo", "Nile Air"]})
    assert patched.status_code == 200, patched.text
    assert sorted(patched.json()["entities"]) == ["Cairo", "Nile Air"]
    async with pool.acquire() as conn:
        names = [
            r["canonical_name"]
            for r in await conn.fetch(
                "SELECT canonical_name FROM entities WHERE bank_id = $1", bank_id
            )
        ]
        linked = await conn.fetchval(
            "SELECT count(*) FROM memory_links WHERE link_type = 'entity'"
            " AND from_unit = $1 AND to_unit = $2",
            omar,
            layla,
        )
    # Lisbon lost its only mention and is gone; Cairo's entity was reused and links the fact
    # to the other fact naming it; Nile Air is new.
    assert "Lisbon" not in names and names.count("Cairo") == 1 and "Nile Air" in names
    assert linked == 1
    [version] = (await api.get(f"{url}/history")).json()
    assert version["change"] == "corrected"
    bad = await api.patch(url, json={"entities": ["  "]})
    assert bad.status_code == 400 and bad.json()["field"] == "entities"


async def test_patch_resolves_entities_as_retain_does(
    api: httpx.AsyncClient, pool: Pool, bank_id: str
) -> None:
    [omar, _, trip] = await retain(
        api,
        bank_id,
        [
            {"document_id": "a", "content": "Omar booked the flight."},
            {"document_id": "b", "content": "My friend Layla Haddad lives in Cairo."},
            {"document_id": "c", "content": "Omar flew to Lisbon with Nadia."},
        ],
    )
    url = f"{BASE}/{bank_id}/memories/{omar}"
    # Resolved (the default): "Layla", next to Cairo, is the Layla Haddad of Cairo.
    resolved = await api.patch(url, json={"entities": ["Layla", "Cairo"]})
    assert resolved.status_code == 200, resolved.text
    assert sorted(resolved.json()["entities"]) == ["Cairo", "Layla Haddad"]
    # ... and "Layla" is now one of its aliases, which a literal match also honours; any other
    # name taken literally is an entity of its own.
    literal = await api.patch(
        url, json={"entities": ["Layla", "Layla Hadad"], "resolve_entities": False}
    )
    assert sorted(literal.json()["entities"]) == ["Layla Hadad", "Layla Haddad"]
    # A corrected text is resolved again: the city it no longer names goes, the new one comes.
    before = (await api.get(f"{BASE}/{bank_id}/memories/{trip}")).json()["entities"]
    assert "Lisbon" in before and "Nadia" in before
    fixed = await api.patch(
        f"{BASE}/{bank_id}/memories/{trip}", json={"text": "Omar flew to Madrid with Nadia."}
    )
    assert fixed.status_code == 200, fixed.text
    after = fixed.json()["entities"]
    assert "Madrid" in after and "Lisbon" not in after
    assert sorted(set(before) - {"Lisbon"}) == sorted(set(after) - {"Madrid"})
    [version] = (await api.get(f"{BASE}/{bank_id}/memories/{trip}/history")).json()
    async with pool.acquire() as conn:
        names = {
            r["canonical_name"]
            for r in await conn.fetch(
                "SELECT canonical_name FROM entities WHERE id = ANY($1::uuid[])",
                version["previous"]["entity_ids"],
            )
        }
        lisbon = await conn.fetchval(
            "SELECT count(*) FROM entities WHERE bank_id = $1 AND canonical_name = 'Lisbon'",
            bank_id,
        )
    # The version keeps the ids before; Lisbon's entity lost its only mention and is gone.
    assert len(version["previous"]["entity_ids"]) == len(before)
    assert names == set(before) - {"Lisbon"} and lisbon == 0


async def test_feedback_moves_importance_within_bounds(
    api: httpx.AsyncClient, bank_id: str
) -> None:
    [fact] = await retain(
        api, bank_id, [{"document_id": "f", "content": "Lena prefers window seats."}]
    )
    url = f"{BASE}/{bank_id}/memories/{fact}/feedback"
    first = (await api.post(url, json={"signal": "useful"})).json()
    assert first["importance"] > first["importance_before"]
    for _ in range(10):
        last = (await api.post(url, json={"signal": "useful"})).json()
    assert last["importance"] == 1.0
    wrong = (await api.post(url, json={"signal": "wrong", "reason": "aisle now"})).json()
    assert wrong["needs_correction"] and wrong["importance"] < 1.0
    bad = await api.post(url, json={"signal": "meh"})
    assert bad.status_code == 422 and "signal" in bad.text  # a schema error names the field
