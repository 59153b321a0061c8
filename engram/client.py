"""A small typed client of Engram's HTTP API, used by the `engram` command line.

It talks to `ENGRAM_URL` (or `--url`), by default the local stack `engram up` starts. Every
failure surfaces as `ApiError` with a one-line message fit for a terminal.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any
from urllib.parse import quote

import httpx

DEFAULT_URL = "http://127.0.0.1:8888"
# Retain and import parse and stage synchronously; a large upload takes a while.
DEFAULT_TIMEOUT_S = 300.0
TERMINAL = ("completed", "failed", "cancelled")


class ApiError(Exception):
    """A request that failed, as one line: what was asked and what the server said."""


def _segment(value: str) -> str:
    return quote(value, safe="")


def _bank_path(bank_id: str, rest: str = "") -> str:
    return f"/v1/default/banks/{_segment(bank_id)}{rest}"


@dataclass(frozen=True)
class ImportFile:
    name: str
    content: str


@dataclass(frozen=True)
class ImportCounts:
    documents_total: int = 0
    documents_done: int = 0
    documents_failed: int = 0
    items_total: int = 0
    items_done: int = 0
    facts_added: int = 0

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ImportCounts:
        known = cls.__dataclass_fields__
        return cls(**{k: int(v) for k, v in data.items() if k in known})


@dataclass(frozen=True)
class RecordError:
    position: str
    message: str


@dataclass(frozen=True)
class ImportStarted:
    operation_id: str
    bank_id: str
    formats: list[str]
    documents: int
    items: int
    skipped: int
    errors: list[RecordError]


@dataclass(frozen=True)
class ImportStatus:
    operation_id: str
    bank_id: str
    status: str  # pending, processing, completed, failed, cancelled
    progress: ImportCounts
    documents: int
    items: int
    skipped: int
    errors: list[RecordError]
    result: dict[str, Any] | None
    error: str | None
    created_at: str
    updated_at: str

    @property
    def finished(self) -> bool:
        return self.status in TERMINAL


@dataclass(frozen=True)
class RecallHit:
    id: str
    text: str
    type: str
    date: str | None  # when it happened, else when it was said (ISO-8601)
    score: float | None
    document_id: str | None = None
    entities: list[str] = field(default_factory=list)


def _errors(data: Sequence[Mapping[str, str]]) -> list[RecordError]:
    return [RecordError(e["position"], e["message"]) for e in data]


class EngramClient:
    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        *,
        timeout: float = DEFAULT_TIMEOUT_S,
        transport: httpx.BaseTransport | None = None,
        api_key: str | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(
            base_url=self.base_url, timeout=timeout, transport=transport, headers=headers
        )

    def __enter__(self) -> EngramClient:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _send(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: Mapping[str, Any] | None = None,
        ok: Sequence[int] = (),
    ) -> httpx.Response:
        try:
            response = self._http.request(method, path, json=body, params=params)
        except httpx.TimeoutException as exc:
            raise ApiError(f"{method} {path}: no answer from {self.base_url} in time") from exc
        except httpx.TransportError as exc:
            raise self._unreachable(exc) from exc
        if response.is_success or response.status_code in ok:
            return response
        raise ApiError(f"{method} {path}: {response.status_code} {_detail(response)}")

    def _unreachable(self, exc: httpx.TransportError) -> ApiError:
        return ApiError(f"cannot reach Engram at {self.base_url} ({exc}); is `engram up` running?")

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self._send(method, path, **kwargs)
        try:
            return response.json()
        except json.JSONDecodeError as exc:
            raise ApiError(f"{method} {path}: the answer is not JSON") from exc

    def _object(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        """`_json` for routes that answer one JSON object."""
        result: dict[str, Any] = self._json(method, path, **kwargs)
        return result

    # --- service ---------------------------------------------------------------------

    def version(self) -> dict[str, Any]:
        return self._object("GET", "/version")

    def ready(self) -> tuple[bool, dict[str, str]]:
        response = self._send("GET", "/ready", ok=(503,))
        body = response.json()
        return response.status_code == 200, dict(body.get("checks", {}))

    # --- banks -----------------------------------------------------------------------

    def list_banks(self) -> list[dict[str, Any]]:
        banks: list[dict[str, Any]] = self._json("GET", "/v1/default/banks")["banks"]
        return banks

    def put_bank(self, bank_id: str, settings: Mapping[str, Any]) -> dict[str, Any]:
        return self._object("PUT", _bank_path(bank_id), body=dict(settings))

    def bank_profile(self, bank_id: str) -> dict[str, Any]:
        return self._object("GET", _bank_path(bank_id, "/profile"))

    def bank_stats(self, bank_id: str) -> dict[str, Any]:
        return self._object("GET", _bank_path(bank_id, "/stats"))

    def delete_bank(self, bank_id: str) -> None:
        self._send("DELETE", _bank_path(bank_id))

    # --- memories --------------------------------------------------------------------

    def retain(self, bank_id: str, items: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        return self._object(
            "POST",
            _bank_path(bank_id, "/memories"),
            body={"items": list(items), "async": False},
        )

    def forget(
        self, bank_id: str, where: Mapping[str, Any], *, dry_run: bool = False
    ) -> dict[str, Any]:
        """POST .../forget: what went (or, with dry_run, would go)."""
        return self._object(
            "POST",
            _bank_path(bank_id, "/forget"),
            body={**where, "dry_run": dry_run},
        )

    def update_memory(
        self, bank_id: str, memory_id: str, changes: Mapping[str, Any]
    ) -> dict[str, Any]:
        """PATCH .../memories/{id}: the corrected memory."""
        return self._object(
            "PATCH",
            _bank_path(bank_id, f"/memories/{_segment(memory_id)}"),
            body=dict(changes),
        )

    def recall_raw(
        self,
        bank_id: str,
        query: str,
        *,
        budget: str = "mid",
        max_tokens: int = 4096,
        types: Sequence[str] | None = None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"query": query, "budget": budget, "max_tokens": max_tokens}
        if types:
            body["types"] = list(types)
        return self._object("POST", _bank_path(bank_id, "/memories/recall"), body=body)

    def reflect_raw(
        self, bank_id: str, query: str, *, budget: str = "mid", context: str | None = None
    ) -> dict[str, Any]:
        """Reflect's answer with what it is based on (`include.facts`)."""
        body: dict[str, Any] = {"query": query, "budget": budget, "include": {"facts": {}}}
        if context:
            body["context"] = context
        return self._object("POST", _bank_path(bank_id, "/reflect"), body=body)

    @staticmethod
    def recall_hits(raw: Mapping[str, Any]) -> list[RecallHit]:
        hits = []
        for item in raw.get("results", []):
            scores = item.get("scores") or {}
            final = scores.get("final")
            hits.append(
                RecallHit(
                    id=str(item["id"]),
                    text=str(item.get("text", "")),
                    type=str(item.get("type") or ""),
                    date=item.get("occurred_start") or item.get("mentioned_at"),
                    score=float(final) if final is not None else None,
                    document_id=item.get("document_id"),
                    entities=list(item.get("entities") or []),
                )
            )
        return hits

    def documents(
        self, bank_id: str, *, limit: int = 100, offset: int = 0, query: str | None = None
    ) -> dict[str, Any]:
        params: dict[str, Any] = {"limit": limit, "offset": offset}
        if query:
            params["q"] = query
        return self._object("GET", _bank_path(bank_id, "/documents"), params=params)

    def entities(self, bank_id: str, *, limit: int = 100, offset: int = 0) -> dict[str, Any]:
        return self._object(
            "GET",
            _bank_path(bank_id, "/entities"),
            params={"limit": limit, "offset": offset},
        )

    # --- import and export -----------------------------------------------------------

    def start_import(
        self,
        bank_id: str,
        files: Sequence[ImportFile],
        *,
        format: str | None = None,
        on_error: str = "skip",
        operation_id: str | None = None,
        user_name: str | None = None,
        assistant_name: str | None = None,
    ) -> ImportStarted:
        body: dict[str, Any] = {
            "files": [{"name": f.name, "content": f.content} for f in files],
            "format": format,
            "on_error": on_error,
            "operation_id": operation_id,
            "user_name": user_name,
            "assistant_name": assistant_name,
        }
        data = self._json("POST", _bank_path(bank_id, "/import"), body=body)
        return ImportStarted(
            operation_id=data["operation_id"],
            bank_id=data["bank_id"],
            formats=list(data["formats"]),
            documents=int(data["documents"]),
            items=int(data["items"]),
            skipped=int(data["skipped"]),
            errors=_errors(data["errors"]),
        )

    def import_status(self, operation_id: str) -> ImportStatus:
        data = self._json("GET", f"/v1/default/imports/{_segment(operation_id)}")
        return ImportStatus(
            operation_id=data["operation_id"],
            bank_id=data["bank_id"],
            status=data["status"],
            progress=ImportCounts.from_json(data.get("progress") or {}),
            documents=int(data["documents"]),
            items=int(data["items"]),
            skipped=int(data["skipped"]),
            errors=_errors(data["errors"]),
            result=data.get("result"),
            error=data.get("error"),
            created_at=data["created_at"],
            updated_at=data["updated_at"],
        )

    def export_lines(self, bank_id: str) -> Iterator[str]:
        """The bank as JSON Lines, streamed line by line."""
        path = _bank_path(bank_id, "/export")
        try:
            with self._http.stream("GET", path) as response:
                if not response.is_success:
                    response.read()
                    raise ApiError(f"GET {path}: {response.status_code} {_detail(response)}")
                yield from response.iter_lines()
        except httpx.TransportError as exc:
            raise self._unreachable(exc) from exc


def _detail(response: httpx.Response) -> str:
    try:
        body = response.json()
    except json.JSONDecodeError:
        return response.text.strip().splitlines()[0] if response.text.strip() else ""
    detail = body.get("detail") if isinstance(body, dict) else None
    return str(detail) if detail is not None else response.text.strip()
