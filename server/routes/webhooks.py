"""Webhooks (`.../webhooks`): subscribe a URL to a bank's events (retain.completed,
retain.failed); deliveries are signed (engine/webhooks.py) and retried by Temporal."""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from engine.errors import InvalidInput
from engine.store.banks import ensure_bank, get_bank
from engine.store.webhooks import (
    Delivery,
    Webhook,
    WebhookChanges,
    create_webhook,
    delete_webhook,
    list_deliveries,
    list_webhooks,
    update_webhook,
)
from engine.webhooks import EVENT_TYPES
from server.http import int_param, iso, json_response, parse_body, path_param, services_of
from server.openapi import ApiRoute
from server.queries import Limit, Offset
from server.responses import (
    DeleteResponse,
    WebhookDeliveryListResponse,
    WebhookListResponse,
    WebhookResponse,
)
from server.schemas import Request as Body


class HttpConfigIn(Body):
    method: str | None = None
    timeout_seconds: int | None = None


class CreateWebhookIn(Body):
    url: str
    secret: str | None = None
    event_types: list[str] | None = None
    enabled: bool = True
    http_config: HttpConfigIn | None = None


class UpdateWebhookIn(Body):
    url: str | None = None
    secret: str | None = None
    event_types: list[str] | None = None
    enabled: bool | None = None
    http_config: HttpConfigIn | None = None


class DeliveriesQuery(BaseModel):
    limit: Limit | None = None
    offset: Offset | None = None


def check_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise InvalidInput("url", "must be an http:// or https:// URL")
    return url


def check_events(events: list[str]) -> list[str]:
    unknown = sorted(set(events) - set(EVENT_TYPES))
    if unknown:
        raise InvalidInput("event_types", f"unknown events {unknown}; known: {list(EVENT_TYPES)}")
    return list(dict.fromkeys(events))


def check_http_config(config: HttpConfigIn | None) -> None:
    if config is not None and (config.method or "POST").upper() != "POST":
        raise InvalidInput("http_config.method", "deliveries are POSTs")


def webhook_json(hook: Webhook) -> dict[str, Any]:
    return {
        "id": hook.id,
        "bank_id": hook.bank_id,
        "url": hook.url,
        # The secret is write-only: a reader learns whether one is set, not what it is.
        "secret": "********" if hook.secret else None,
        "event_types": hook.event_types or list(EVENT_TYPES),
        "enabled": hook.enabled,
        "http_config": {"method": "POST", "timeout_seconds": 10, "headers": {}, "params": {}},
        "created_at": iso(hook.created_at),
        "updated_at": iso(hook.updated_at),
    }


def delivery_json(d: Delivery) -> dict[str, Any]:
    return {
        "id": d.id,
        "webhook_id": d.webhook_id,
        "url": d.url,
        "event_type": d.event_type,
        "status": d.status,
        "attempts": d.attempts,
        "next_retry_at": None,
        "last_error": d.last_error,
        "last_response_status": d.last_response_status,
        "last_response_body": None,
        "last_attempt_at": iso(d.last_attempt_at),
        "created_at": iso(d.created_at),
        "updated_at": iso(d.updated_at),
    }


async def create(request: Request) -> Response:
    bank_id = path_param(request, "bank_id")
    body = await parse_body(request, CreateWebhookIn)
    check_http_config(body.http_config)
    async with services_of(request).pool.acquire() as conn, conn.transaction():
        await ensure_bank(conn, bank_id)
        hook = await create_webhook(
            conn,
            bank_id,
            str(uuid.uuid4()),
            check_url(body.url),
            body.secret or None,
            check_events(body.event_types or []),
            body.enabled,
        )
    # 201, as Hindsight's client expects for this route (docs/wire-format.md §0).
    return json_response(webhook_json(hook), status_code=201)


async def list_all(request: Request) -> Response:
    bank_id = path_param(request, "bank_id")
    async with services_of(request).pool.acquire() as conn:
        await get_bank(conn, bank_id)
        hooks = await list_webhooks(conn, bank_id)
    return json_response({"items": [webhook_json(h) for h in hooks]})


async def update(request: Request) -> Response:
    body = await parse_body(request, UpdateWebhookIn)
    check_http_config(body.http_config)
    changes = WebhookChanges(
        url=check_url(body.url) if body.url is not None else None,
        secret=body.secret,
        event_types=check_events(body.event_types) if body.event_types is not None else None,
        enabled=body.enabled,
    )
    async with services_of(request).pool.acquire() as conn:
        hook = await update_webhook(
            conn, path_param(request, "bank_id"), path_param(request, "webhook_id"), changes
        )
    return json_response(webhook_json(hook))


async def delete(request: Request) -> Response:
    webhook_id = path_param(request, "webhook_id")
    async with services_of(request).pool.acquire() as conn:
        await delete_webhook(conn, path_param(request, "bank_id"), webhook_id)
    return json_response({"success": True, "message": f"webhook {webhook_id} deleted"})


async def deliveries(request: Request) -> Response:
    limit = int_param(request, "limit", 50, low=1, high=500)
    offset = int_param(request, "offset", 0, high=10**9)
    async with services_of(request).pool.acquire() as conn:
        items = await list_deliveries(
            conn, path_param(request, "bank_id"), path_param(request, "webhook_id"), limit, offset
        )
    return json_response({"items": [delivery_json(d) for d in items], "next_cursor": None})


def routes() -> list[BaseRoute]:
    base = "/v1/default/banks/{bank_id}/webhooks"
    one = base + "/{webhook_id}"
    return [
        ApiRoute(
            base,
            create,
            methods=["POST"],
            tag="webhooks",
            status=201,
            summary="Subscribe a URL to the bank's events",
            body=CreateWebhookIn,
            response=WebhookResponse,
        ),
        ApiRoute(
            base,
            list_all,
            methods=["GET"],
            tag="webhooks",
            summary="List webhooks",
            response=WebhookListResponse,
        ),
        ApiRoute(
            one,
            update,
            methods=["PATCH"],
            tag="webhooks",
            summary="Change a webhook",
            body=UpdateWebhookIn,
            response=WebhookResponse,
        ),
        ApiRoute(
            one,
            delete,
            methods=["DELETE"],
            tag="webhooks",
            summary="Delete a webhook",
            response=DeleteResponse,
        ),
        ApiRoute(
            one + "/deliveries",
            deliveries,
            methods=["GET"],
            tag="webhooks",
            summary="A webhook's deliveries, newest first",
            query=DeliveriesQuery,
            response=WebhookDeliveryListResponse,
        ),
    ]
