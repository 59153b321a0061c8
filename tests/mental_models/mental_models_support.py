"""HTTP helpers of the mental-model tests."""

from __future__ import annotations

from typing import Any

import httpx
from support.operations import finished_operation


async def retain(api: httpx.AsyncClient, bank_id: str, document_id: str, text: str) -> None:
    response = await api.post(
        f"/v1/default/banks/{bank_id}/memories",
        json={"items": [{"content": text, "document_id": document_id}]},
    )
    assert response.status_code == 200, response.text


async def create_model(api: httpx.AsyncClient, bank_id: str, **body: Any) -> dict[str, Any]:
    response = await api.post(f"/v1/default/banks/{bank_id}/mental-models", json=body)
    assert response.status_code == 200, response.text
    created: dict[str, Any] = response.json()
    return created


async def get_model(api: httpx.AsyncClient, bank_id: str, model_id: str) -> dict[str, Any]:
    response = await api.get(f"/v1/default/banks/{bank_id}/mental-models/{model_id}")
    assert response.status_code == 200, response.text
    model: dict[str, Any] = response.json()
    return model


async def history(api: httpx.AsyncClient, bank_id: str, model_id: str) -> list[dict[str, Any]]:
    response = await api.get(f"/v1/default/banks/{bank_id}/mental-models/{model_id}/history")
    assert response.status_code == 200, response.text
    versions: list[dict[str, Any]] = response.json()
    return versions


async def refresh(
    api: httpx.AsyncClient, bank_id: str, model_id: str, body: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Ask for a refresh and wait for its operation."""
    url = f"/v1/default/banks/{bank_id}/mental-models/{model_id}/refresh"
    response = await (api.post(url, json=body) if body is not None else api.post(url))
    assert response.status_code == 200, response.text
    return await finished_operation(api, bank_id, response.json()["operation_id"])
