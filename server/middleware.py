"""The outermost guards of every request: a bounded number in flight, and no plain-text 500.

`AdmissionMiddleware` answers 503 with `Retry-After` as soon as `limit` API requests are in
progress in this process, so an overloaded server sheds load in a millisecond instead of
queueing requests until their callers time out. Probes and scrapes (`/health*`, `/ready`,
`/metrics`, `/version`) are never shed: an orchestrator must see a busy server as alive.

`ErrorMiddleware` turns any exception that got past the exception handlers (a bug in a
route, a driver error nobody mapped) into the JSON 500 of server/errors.py, with an
`error_id` that the log line carrying the traceback repeats.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from server.errors import error_body, internal_error

# How long a shed client is told to wait. Recalls take ~0.1 s and synchronous retains a few
# seconds, so one second lets the in-flight work drain without idling the server.
RETRY_AFTER_S = 1
UNSHED_PREFIXES = ("/health", "/ready", "/metrics", "/version")


class AdmissionMiddleware:
    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit
        self.in_flight = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or str(scope["path"]).startswith(UNSHED_PREFIXES):
            await self.app(scope, receive, send)
            return
        if self.in_flight >= self.limit:
            response = error_body(
                503,
                f"the server is busy ({self.limit} requests in progress); "
                f"retry after {RETRY_AFTER_S} s",
                headers={"Retry-After": str(RETRY_AFTER_S)},
            )
            await response(scope, receive, send)
            return
        self.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight -= 1


class ErrorMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def send_wrapper(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        except Exception as exc:
            if started:  # too late for an error body: the server closes the connection
                raise
            response = internal_error(scope["method"], scope["path"], exc)
            await response(scope, receive, send)
