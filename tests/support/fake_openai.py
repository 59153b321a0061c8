"""A scripted OpenAI-compatible HTTP server for tests that touch LLM paths.

It listens on a real TCP port (so a worker process can reach it too) and runs uvicorn in a
background thread with its own event loop, so sync and async tests use it the same way:

    with FakeOpenAI([Reply({"facts": []})]) as fake:
        settings = LLMSettings(api_key="test", base_url=fake.base_url)
        ...
        assert len(fake.requests) == 1

Scripted responses are consumed in order; when the script runs out the `responder` (if any)
answers, otherwise the server replies 500 "script exhausted" so the test fails loudly.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

MODEL = "fake-model"


@dataclass(frozen=True)
class Reply:
    """An assistant message; `content` that is not a string is sent JSON-encoded."""

    content: object
    finish_reason: str = "stop"
    prompt_tokens: int | None = None  # None: estimated from the request size
    completion_tokens: int | None = None


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: str  # a JSON string, exactly as the model would emit it


@dataclass(frozen=True)
class ToolCalls:
    """An assistant message asking for tool calls (`finish_reason: "tool_calls"`)."""

    calls: tuple[ToolCall, ...]
    content: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


@dataclass(frozen=True)
class HTTPError:
    status: int
    message: str = "fake failure"
    error_type: str = "server_error"


@dataclass(frozen=True)
class Raw:
    """A verbatim HTTP body, for malformed wire responses."""

    body: str
    status: int = 200
    content_type: str = "application/json"


@dataclass(frozen=True)
class Delay:
    """Wait `seconds` (to trip client timeouts), then answer with `then`."""

    seconds: float
    then: Spec = field(default_factory=lambda: Reply({}))


Spec = Reply | ToolCalls | HTTPError | Raw | Delay
Responder = Callable[[dict[str, Any]], Spec]


def _tokens(given: int | None, text: str) -> int:
    return given if given is not None else len(text) // 4 + 1


def _completion(request: dict[str, Any], spec: Reply | ToolCalls, number: int) -> dict[str, Any]:
    prompt_text = json.dumps(request.get("messages", []))
    message: dict[str, Any] = {"role": "assistant", "refusal": None}
    if isinstance(spec, Reply):
        content = spec.content if isinstance(spec.content, str) else json.dumps(spec.content)
        message["content"] = content
        finish_reason = spec.finish_reason
        completion_text = content
    else:
        message["content"] = spec.content
        message["tool_calls"] = [
            {
                "id": f"call_{number}_{i}",
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for i, call in enumerate(spec.calls)
        ]
        finish_reason = "tool_calls"
        completion_text = json.dumps(message["tool_calls"])
    prompt_tokens = _tokens(spec.prompt_tokens, prompt_text)
    completion_tokens = _tokens(spec.completion_tokens, completion_text)
    return {
        "id": f"chatcmpl-fake-{number}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.get("model", MODEL),
        "choices": [
            {"index": 0, "message": message, "finish_reason": finish_reason, "logprobs": None}
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def _error(status: int, message: str, error_type: str) -> Response:
    body = {"error": {"message": message, "type": error_type, "param": None, "code": None}}
    return JSONResponse(body, status_code=status)


class FakeOpenAI:
    """A scripted `/v1/chat/completions` server on 127.0.0.1; see the module docstring."""

    def __init__(self, script: Iterable[Spec] = (), responder: Responder | None = None) -> None:
        self._lock = threading.Lock()
        self._script: deque[Spec] = deque(script)
        self._responder = responder
        self._requests: list[dict[str, Any]] = []
        self._closing = threading.Event()
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind(("127.0.0.1", 0))
        self.port: int = self._socket.getsockname()[1]
        app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._chat, methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
            ]
        )
        config = uvicorn.Config(
            app,
            loop="asyncio",
            http="h11",
            ws="none",
            lifespan="off",
            log_config=None,
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=2,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True
        )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Every chat completion request body received so far, in arrival order."""
        with self._lock:
            return list(self._requests)

    def push(self, *specs: Spec) -> None:
        with self._lock:
            self._script.extend(specs)

    def __enter__(self) -> FakeOpenAI:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("FakeOpenAI did not start")
            time.sleep(0.005)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._closing.set()
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._socket.close()

    def _next_spec(self, body: dict[str, Any]) -> Spec:
        with self._lock:
            self._requests.append(body)
            if self._script:
                return self._script.popleft()
        if self._responder is None:
            return HTTPError(500, "FakeOpenAI: script exhausted and no responder")
        try:
            return self._responder(body)
        except Exception as exc:  # surfaced to the client, so the test sees it
            return HTTPError(500, f"FakeOpenAI: responder failed: {exc!r}")

    async def _chat(self, request: Request) -> Response:
        try:
            body = json.loads(await request.body())
        except json.JSONDecodeError as exc:
            return _error(400, f"invalid JSON body: {exc}", "invalid_request_error")
        if not isinstance(body, dict):
            return _error(400, "body must be a JSON object", "invalid_request_error")
        spec = self._next_spec(body)
        while isinstance(spec, Delay):
            # Waits in a helper thread so closing the fake cuts the delay short.
            await asyncio.to_thread(self._closing.wait, spec.seconds)
            spec = spec.then
        if isinstance(spec, HTTPError):
            return _error(spec.status, spec.message, spec.error_type)
        if isinstance(spec, Raw):
            return Response(spec.body, status_code=spec.status, media_type=spec.content_type)
        return JSONResponse(_completion(body, spec, len(self.requests)))

    async def _models(self, request: Request) -> Response:
        model = {"id": MODEL, "object": "model", "created": 0, "owned_by": "fake"}
        return JSONResponse({"object": "list", "data": [model]})
