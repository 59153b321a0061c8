"""Answers shared by every area: deletions, token usage, 501s, version and liveness."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

Timestamp = str | None


class DeleteResponse(BaseModel):
    success: bool
    message: str | None = None
    deleted_count: int | None = None


class TokenUsage(BaseModel):
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    cached_tokens: int = 0
    thoughts_tokens: int = 0


class Features(BaseModel):
    observations: bool
    mcp: bool
    worker: bool
    bank_config_api: bool
    bank_llm_health: bool
    file_upload_api: bool
    document_export_api: bool
    document_import_api: bool
    audit_log: bool
    llm_trace: bool
    store_document_text: bool


class VersionResponse(BaseModel):
    api_version: str
    engram_version: str | None = None
    features: Features


class LiveResponse(BaseModel):
    status: Literal["alive"]
    version: str
    uptime_seconds: float


class NotImplementedResponse(BaseModel):
    detail: str
    use_instead: str | None = None
