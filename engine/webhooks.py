"""Webhook payloads: the body Engram sends and its signature.

The body is the JSON of `{"event", "bank_id", "delivery_id", "created_at", "data"}` with
sorted keys; `X-Engram-Signature: sha256=<hex HMAC-SHA256 of the body with the secret>`
(only when the webhook has a secret), `X-Engram-Event` and `X-Engram-Delivery` name it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

# Hindsight's retain.completed and consolidation.completed, and the failures of both.
# (Hindsight's memory_defense.triggered has no counterpart: Engram has no memory defense.)
EVENT_TYPES = (
    "retain.completed",
    "retain.failed",
    "consolidation.completed",
    "consolidation.failed",
)


def body_bytes(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str).encode()


def signature(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def headers(event_type: str, delivery_id: str, secret: str | None, body: bytes) -> dict[str, str]:
    out = {
        "content-type": "application/json",
        "user-agent": "engram-webhooks/1",
        "x-engram-event": event_type,
        "x-engram-delivery": delivery_id,
    }
    if secret:
        out["x-engram-signature"] = signature(secret, body)
    return out
