"""Webhook activities: queue an event's deliveries, send one delivery (retried by Temporal),
give one up."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx
from temporalio import activity
from temporalio.exceptions import ApplicationError

from engine.db import Pool
from engine.store.operations import get_operation
from engine.store.webhooks import (
    get_delivery,
    mark_failed,
    queue_deliveries,
    record_attempt,
    webhook_secret,
)
from engine.webhooks import body_bytes, headers

SEND_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class WebhookEvent:
    bank_id: str
    event_id: str  # stable per event, so a retried step queues nothing twice
    event_type: str
    data: dict[str, Any]


@dataclass(frozen=True)
class QueuedDeliveries:
    delivery_ids: list[str]


@dataclass(frozen=True)
class DeliveryRequest:
    delivery_id: str


@dataclass(frozen=True)
class DeliveryFailure:
    delivery_id: str
    error: str


class WebhookActivities:
    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    @activity.defn
    async def queue_webhook_deliveries(self, event: WebhookEvent) -> QueuedDeliveries:
        async with self._pool.acquire() as conn:
            data = dict(event.data)
            if event.event_type == "retain.completed" and "operation_id" in data:
                # The document ids live in the operation's row (a workflow result would
                # not hold a large request's); the event carries them as Hindsight's does.
                operation = await get_operation(conn, event.bank_id, str(data["operation_id"]))
                data["document_ids"] = list((operation.result or {}).get("document_ids", []))
            ids = await queue_deliveries(
                conn, event.bank_id, event.event_id, event.event_type, data
            )
        return QueuedDeliveries(ids)

    @activity.defn
    async def deliver_webhook(self, request: DeliveryRequest) -> None:
        """POST the signed payload; a non-2xx answer or a network error is retried."""
        async with self._pool.acquire() as conn:
            delivery = await get_delivery(conn, request.delivery_id)
            secret = await webhook_secret(conn, delivery.bank_id, delivery.webhook_id)
        if delivery.status != "pending":
            return
        payload = {
            "event": delivery.event_type,
            "bank_id": delivery.bank_id,
            "delivery_id": delivery.id,
            "created_at": delivery.created_at.astimezone(UTC).isoformat(),
            "sent_at": datetime.now(UTC).isoformat(),
            "data": delivery.payload,
        }
        body = body_bytes(payload)
        sent = headers(delivery.event_type, delivery.id, secret, body)
        try:
            async with httpx.AsyncClient(timeout=SEND_TIMEOUT_S) as client:
                response = await client.post(delivery.url, content=body, headers=sent)
        except httpx.HTTPError as exc:
            error = f"{type(exc).__name__}: {exc}"
            async with self._pool.acquire() as conn:
                await record_attempt(conn, delivery.id, "pending", None, error)
            raise ApplicationError(error, type="WebhookUnreachable") from exc
        if 200 <= response.status_code < 300:
            async with self._pool.acquire() as conn:
                await record_attempt(conn, delivery.id, "delivered", response.status_code, None)
            return
        error = f"HTTP {response.status_code}: {response.text[:200]}"
        async with self._pool.acquire() as conn:
            await record_attempt(conn, delivery.id, "pending", response.status_code, error)
        raise ApplicationError(error, type="WebhookRefused")

    @activity.defn
    async def fail_webhook_delivery(self, failure: DeliveryFailure) -> None:
        async with self._pool.acquire() as conn:
            await mark_failed(conn, failure.delivery_id, failure.error)
