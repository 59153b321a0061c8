"""A thin client for any OpenAI-compatible chat endpoint.

The SDK's own retries are off (`max_retries=0`): retrying is the caller's job (Temporal
activities retry with backoff), so every failure surfaces at once as an `LLMRequestError`
that says whether trying again can help.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, Literal, Protocol

import openai
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionAssistantMessageParam,
    ChatCompletionMessage,
    ChatCompletionMessageFunctionToolCall,
    ChatCompletionMessageFunctionToolCallParam,
    ChatCompletionMessageParam,
    ChatCompletionToolUnionParam,
    completion_create_params,
)
from openai.types.chat.chat_completion import Choice

from engine.errors import ConfigurationError, EngramError
from engine.settings import LLMSettings

# Status codes after which the same request may succeed later (timeout, rate limit).
_RETRYABLE_4XX = frozenset({408, 429})
_FENCE = re.compile(r"^\s*```[A-Za-z0-9_-]*\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")


class LLMError(EngramError):
    """Base of the errors raised while talking to the LLM."""


class LLMRequestError(LLMError):
    """The request failed in transport or was refused; `retryable` says if a retry can help."""

    def __init__(self, message: str, *, retryable: bool, status: int | None = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.status = status


class LLMOutputError(LLMError):
    """The model answered, but not with what was asked for (e.g. not JSON)."""

    retryable = True  # another sample may be usable

    def __init__(self, message: str, raw: str) -> None:
        super().__init__(message)
        self.raw = raw


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
        )


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # the raw JSON string the model wrote; the caller validates it


@dataclass(frozen=True)
class ChatResult:
    content: str | None
    finish_reason: str
    usage: Usage
    tool_calls: list[ToolCall] = field(default_factory=list)

    def as_message(self) -> ChatCompletionAssistantMessageParam:
        """The assistant turn to append to the history before sending tool results back."""
        message: ChatCompletionAssistantMessageParam = {"role": "assistant"}
        if self.content is not None:
            message["content"] = self.content
        if self.tool_calls:
            calls: list[ChatCompletionMessageFunctionToolCallParam] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in self.tool_calls
            ]
            message["tool_calls"] = calls
        return message


def parse_json_lenient(raw: str) -> object:
    """Parse JSON a model wrote, forgiving code fences, prose around it and trailing commas."""
    text = raw.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1).strip()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    starts = [i for i in (text.find("{"), text.find("[")) if i >= 0]
    if starts:
        start = min(starts)
        end = max(text.rfind("}"), text.rfind("]"))
        if end > start:
            text = text[start : end + 1]
    try:
        return json.loads(_TRAILING_COMMA.sub(r"\1", text))
    except json.JSONDecodeError as exc:
        raise LLMOutputError(f"the output is not valid JSON ({exc})", raw) from exc


def _request_error(exc: openai.OpenAIError) -> LLMRequestError:
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        retryable = status >= 500 or status in _RETRYABLE_4XX
        return LLMRequestError(
            f"LLM request failed with HTTP {status}: {exc.message}",
            retryable=retryable,
            status=status,
        )
    if isinstance(exc, openai.APITimeoutError):
        return LLMRequestError(f"LLM request timed out: {exc}", retryable=True)
    if isinstance(exc, openai.APIConnectionError):
        return LLMRequestError(f"cannot reach the LLM: {exc}", retryable=True)
    if isinstance(exc, openai.APIResponseValidationError):
        return LLMRequestError(f"the LLM server sent a malformed response: {exc}", retryable=True)
    return LLMRequestError(f"LLM client error: {exc}", retryable=False)


@dataclass(frozen=True)
class LLMCall:
    """One request to the model, as the request log keeps it."""

    bank_id: str | None
    operation: str  # retain, consolidation, reflect, health, other
    model: str
    status: Literal["success", "error"]
    started_at: datetime
    duration_ms: int
    usage: Usage
    error: str | None


class LLMRecorder(Protocol):
    async def record(self, call: LLMCall) -> None: ...


# Which bank and operation the calls of the current task serve: set by the activity that
# makes them (`llm_scope`), read when a call is recorded. Task-local, like a request id.
CALL_SCOPE: ContextVar[tuple[str | None, str]] = ContextVar(
    "engram_llm_call_scope", default=(None, "other")
)


@contextmanager
def llm_scope(bank_id: str | None, operation: str) -> Iterator[None]:
    token = CALL_SCOPE.set((bank_id, operation))
    try:
        yield
    finally:
        CALL_SCOPE.reset(token)


class LLMClient:
    """One OpenAI-compatible endpoint and model; build once per process, close on shutdown."""

    def __init__(self, settings: LLMSettings, recorder: LLMRecorder | None = None) -> None:
        self._recorder = recorder
        if not settings.configured:
            raise ConfigurationError("the LLM client needs an API key (ENGRAM_LLM_API_KEY)")
        self.model = settings.model
        self._client = openai.AsyncOpenAI(
            api_key=settings.api_key,
            base_url=settings.base_url or None,
            timeout=settings.timeout_s,
            max_retries=0,
        )
        # Turned off only after a json_schema request got a 400 and the json_object retry of
        # the same request succeeded, so one bad prompt cannot downgrade the client.
        self._json_schema_supported = True

    async def close(self) -> None:
        await self._client.close()

    async def __aenter__(self) -> LLMClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def chat(
        self,
        messages: Sequence[ChatCompletionMessageParam],
        tools: Sequence[ChatCompletionToolUnionParam] | None = None,
        *,
        max_tokens: int | None = None,
    ) -> ChatResult:
        """One chat turn; tool calls come back unexecuted with their raw argument strings.
        `max_tokens` caps the completion (None: the server's default)."""
        return await self._create(list(messages), tools=tools, max_tokens=max_tokens)

    async def complete_raw(
        self, system: str, user: str, schema_name: str, json_schema: dict[str, Any]
    ) -> ChatResult:
        """Ask for JSON following `json_schema`; the content is returned unparsed.

        Structured outputs (`json_schema`) first; a server that rejects them with a 400 gets
        the same request as `json_object`, with the schema spelled out in the system prompt.
        """
        if self._json_schema_supported:
            response_format: completion_create_params.ResponseFormat = {
                "type": "json_schema",
                "json_schema": {"name": schema_name, "schema": json_schema, "strict": True},
            }
            try:
                return await self._create(_messages(system, user), response_format)
            except LLMRequestError as exc:
                if exc.status != 400:
                    raise
        fallback_system = (
            f"{system}\n\nRespond with one JSON object that follows this JSON schema:\n"
            f"{json.dumps(json_schema)}"
        )
        result = await self._create(_messages(fallback_system, user), {"type": "json_object"})
        self._json_schema_supported = False
        return result

    async def complete_json(
        self, system: str, user: str, schema_name: str, json_schema: dict[str, Any]
    ) -> tuple[dict[str, Any], Usage]:
        """Like `complete_raw`, parsed; raises `LLMOutputError` unless the answer is an object."""
        result = await self.complete_raw(system, user, schema_name, json_schema)
        raw = result.content or ""
        value = parse_json_lenient(raw)
        if not isinstance(value, dict):
            raise LLMOutputError("the output is JSON but not an object", raw)
        return value, result.usage

    async def _create(
        self,
        messages: list[ChatCompletionMessageParam],
        response_format: completion_create_params.ResponseFormat | None = None,
        tools: Sequence[ChatCompletionToolUnionParam] | None = None,
        max_tokens: int | None = None,
    ) -> ChatResult:
        started = datetime.now(UTC)
        clock = time.perf_counter()
        try:
            result = await self._send(messages, response_format, tools, max_tokens)
        except (LLMRequestError, LLMOutputError) as exc:
            await self._record(started, clock, "error", Usage(), str(exc))
            raise
        await self._record(started, clock, "success", result.usage, None)
        return result

    async def _record(
        self,
        started: datetime,
        clock: float,
        status: Literal["success", "error"],
        usage: Usage,
        error: str | None,
    ) -> None:
        if self._recorder is None:
            return
        bank_id, operation = CALL_SCOPE.get()
        duration_ms = int((time.perf_counter() - clock) * 1000)
        call = LLMCall(bank_id, operation, self.model, status, started, duration_ms, usage, error)
        await self._recorder.record(call)

    async def _send(
        self,
        messages: list[ChatCompletionMessageParam],
        response_format: completion_create_params.ResponseFormat | None,
        tools: Sequence[ChatCompletionToolUnionParam] | None,
        max_tokens: int | None,
    ) -> ChatResult:
        try:
            response = await self._client.chat.completions.create(
                model=self.model,
                messages=messages,
                response_format=openai.omit if response_format is None else response_format,
                tools=openai.omit if tools is None else tools,
                max_tokens=openai.omit if max_tokens is None else max_tokens,
            )
        except openai.OpenAIError as exc:
            raise _request_error(exc) from exc
        return _result(response)


def _result(response: object) -> ChatResult:
    """The first choice of a completion; the SDK does not validate bodies (so that lenient
    servers work), hence the shape checks: a malformed body is a server fault, retryable."""
    choices = response.choices if isinstance(response, ChatCompletion) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Choice):
        raise LLMRequestError("the LLM server sent a response without choices", retryable=True)
    choice = choices[0]
    if not isinstance(choice.message, ChatCompletionMessage):
        raise LLMRequestError("the LLM server sent a choice without a message", retryable=True)
    calls: list[ToolCall] = []
    for call in choice.message.tool_calls or []:
        if not isinstance(call, ChatCompletionMessageFunctionToolCall):
            raise LLMOutputError(f"unsupported tool call {call!r}", "")
        calls.append(ToolCall(call.id, call.function.name, call.function.arguments))
    usage = response.usage if isinstance(response, ChatCompletion) else None
    return ChatResult(
        content=choice.message.content,
        finish_reason=str(choice.finish_reason or ""),
        usage=Usage(usage.prompt_tokens or 0, usage.completion_tokens or 0) if usage else Usage(),
        tool_calls=calls,
    )


def _messages(system: str, user: str) -> list[ChatCompletionMessageParam]:
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]
