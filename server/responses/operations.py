"""Answers of the operation, LLM-request-log and webhook routes."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

from server.responses.common import (
    Timestamp,
)


class OperationProgress(BaseModel):
    stage: str
    at: str | None
    processed: int | None = None
    total: int | None = None
    detail: dict[str, int] | None = None


OperationStatus = Literal["pending", "processing", "completed", "failed", "cancelled", "not_found"]


class OperationResponse(BaseModel):
    id: str
    operation_id: str | None = None
    task_type: str
    items_count: int
    created_at: str
    status: OperationStatus
    updated_at: Timestamp = None
    completed_at: Timestamp = None
    error_message: str | None = None
    progress: OperationProgress | None = None
    result_metadata: dict[str, Any] | None = None


class OperationsListResponse(BaseModel):
    bank_id: str
    operations: list[OperationResponse]
    total: int
    limit: int
    offset: int


class CancelOperationResponse(BaseModel):
    success: bool
    message: str
    operation_id: str


class LLMRequestEntry(BaseModel):
    id: str
    bank_id: str | None
    operation: str | None
    model: str | None
    status: str
    started_at: Timestamp
    ended_at: Timestamp
    duration_ms: int | None
    input_tokens: int | None
    output_tokens: int | None
    total_tokens: int | None
    error: str | None


class LLMRequestListResponse(BaseModel):
    bank_id: str
    total: int
    limit: int
    offset: int
    items: list[LLMRequestEntry]


class LLMTokenSums(BaseModel):
    input: int
    output: int
    cached: int
    total: int


class LLMRequestStatsBucket(BaseModel):
    time: str
    statuses: dict[str, int]
    total: int
    tokens: LLMTokenSums


class LLMRequestStatsResponse(BaseModel):
    bank_id: str
    period: str
    trunc: str
    start: str
    buckets: list[LLMRequestStatsBucket]


class BankLlmHealthResponse(BaseModel):
    bank_id: str
    operations: list[dict[str, Any]]


class WebhookResponse(BaseModel):
    id: str
    bank_id: str | None
    url: str
    secret: str | None = None
    event_types: list[str]
    enabled: bool
    http_config: dict[str, Any] | None = None
    created_at: Timestamp = None
    updated_at: Timestamp = None


class WebhookListResponse(BaseModel):
    items: list[WebhookResponse]


class WebhookDeliveryResponse(BaseModel):
    id: str
    webhook_id: str | None
    url: str
    event_type: str
    status: str
    attempts: int
    last_error: str | None = None
    last_response_status: int | None = None
    last_attempt_at: Timestamp = None
    created_at: Timestamp = None
    updated_at: Timestamp = None


class WebhookDeliveryListResponse(BaseModel):
    items: list[WebhookDeliveryResponse]
    next_cursor: str | None = None
