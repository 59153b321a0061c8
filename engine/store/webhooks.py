"""Webhooks and their deliveries."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from engine.db import Connection
from engine.errors import NotFound


@dataclass(frozen=True)
class Webhook:
    bank_id: str
    id: str
    url: str
    secret: str | None
    event_types: list[str]
    enabled: bool
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class WebhookChanges:
    url: str | None = None
    secret: str | None = None
    event_types: list[str] | None = None
    enabled: bool | None = None


@dataclass(frozen=True)
class Delivery:
    id: str
    bank_id: str
    webhook_id: str
    url: str
    event_type: str
    payload: dict[str, Any]
    status: str
    attempts: int
    last_error: str | None
    last_response_status: int | None
    last_attempt_at: datetime | None
    created_at: datetime
    updated_at: datetime


_HOOK = "bank_id, id, url, secret, event_types, enabled, created_at, updated_at"
_DELIVERY = """id, bank_id, webhook_id, url, event_type, payload, status, attempts, last_error,
last_response_status, last_attempt_at, created_at, updated_at"""


def _webhook(row: asyncpg.Record) -> Webhook:
    return Webhook(**dict(row))


def _delivery(row: asyncpg.Record) -> Delivery:
    data = dict(row)
    payload = data["payload"]
    data["payload"] = json.loads(payload) if isinstance(payload, str) else payload
    return Delivery(**data)


async def create_webhook(
    conn: Connection,
    bank_id: str,
    webhook_id: str,
    url: str,
    secret: str | None,
    event_types: list[str],
    enabled: bool,
) -> Webhook:
    row = await conn.fetchrow(
        f"INSERT INTO webhooks (bank_id, id, url, secret, event_types, enabled)"
        f" VALUES ($1, $2, $3, $4, $5, $6) RETURNING {_HOOK}",
        bank_id,
        webhook_id,
        url,
        secret,
        event_types,
        enabled,
    )
    assert row is not None
    return _webhook(row)


async def list_webhooks(conn: Connection, bank_id: str) -> list[Webhook]:
    rows = await conn.fetch(
        f"SELECT {_HOOK} FROM webhooks WHERE bank_id = $1 ORDER BY created_at, id", bank_id
    )
    return [_webhook(r) for r in rows]


async def update_webhook(
    conn: Connection, bank_id: str, webhook_id: str, changes: WebhookChanges
) -> Webhook:
    row = await conn.fetchrow(
        f"UPDATE webhooks SET url = coalesce($3, url), secret = coalesce($4, secret),"
        f" event_types = coalesce($5, event_types), enabled = coalesce($6, enabled),"
        f" updated_at = now() WHERE bank_id = $1 AND id = $2 RETURNING {_HOOK}",
        bank_id,
        webhook_id,
        changes.url,
        changes.secret,
        changes.event_types,
        changes.enabled,
    )
    if row is None:
        raise NotFound("webhook", webhook_id)
    return _webhook(row)


async def delete_webhook(conn: Connection, bank_id: str, webhook_id: str) -> None:
    deleted = await conn.fetchval(
        "DELETE FROM webhooks WHERE bank_id = $1 AND id = $2 RETURNING 1", bank_id, webhook_id
    )
    if deleted is None:
        raise NotFound("webhook", webhook_id)


_QUEUE = """
INSERT INTO webhook_deliveries (id, bank_id, webhook_id, url, event_type, payload)
SELECT $2 || ':' || w.id, w.bank_id, w.id, w.url, $3, $4::jsonb
FROM webhooks w
WHERE w.bank_id = $1 AND w.enabled AND (w.event_types = '{}' OR $3 = ANY(w.event_types))
ON CONFLICT (id) DO NOTHING
"""


async def queue_deliveries(
    conn: Connection, bank_id: str, event_id: str, event_type: str, data: dict[str, Any]
) -> list[str]:
    """One delivery per enabled subscribed webhook, id `<event id>:<webhook id>` so a retried
    step queues nothing twice; returns every delivery id of the event still pending."""
    await conn.execute(_QUEUE, bank_id, event_id, event_type, json.dumps(data))
    rows = await conn.fetch(
        "SELECT id FROM webhook_deliveries WHERE bank_id = $1 AND id LIKE $2 || ':%'"
        " AND status = 'pending' ORDER BY id",
        bank_id,
        event_id,
    )
    return [r["id"] for r in rows]


async def get_delivery(conn: Connection, delivery_id: str) -> Delivery:
    row = await conn.fetchrow(
        f"SELECT {_DELIVERY} FROM webhook_deliveries WHERE id = $1", delivery_id
    )
    if row is None:
        raise NotFound("delivery", delivery_id)
    return _delivery(row)


async def webhook_secret(conn: Connection, bank_id: str, webhook_id: str) -> str | None:
    secret: str | None = await conn.fetchval(
        "SELECT secret FROM webhooks WHERE bank_id = $1 AND id = $2", bank_id, webhook_id
    )
    return secret


async def record_attempt(
    conn: Connection,
    delivery_id: str,
    status: str,
    response_status: int | None,
    error: str | None,
) -> None:
    await conn.execute(
        "UPDATE webhook_deliveries SET attempts = attempts + 1, status = $2,"
        " last_response_status = $3, last_error = $4, last_attempt_at = now(),"
        " updated_at = now() WHERE id = $1",
        delivery_id,
        status,
        response_status,
        error,
    )


async def mark_failed(conn: Connection, delivery_id: str, error: str) -> None:
    await conn.execute(
        "UPDATE webhook_deliveries SET status = 'failed', last_error = $2, updated_at = now()"
        " WHERE id = $1 AND status = 'pending'",
        delivery_id,
        error,
    )


async def list_deliveries(
    conn: Connection, bank_id: str, webhook_id: str, limit: int, offset: int
) -> list[Delivery]:
    rows = await conn.fetch(
        f"SELECT {_DELIVERY} FROM webhook_deliveries WHERE bank_id = $1 AND webhook_id = $2"
        " ORDER BY created_at DESC, id LIMIT $3 OFFSET $4",
        bank_id,
        webhook_id,
        limit,
        offset,
    )
    return [_delivery(r) for r in rows]
