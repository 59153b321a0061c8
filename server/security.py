"""One ASGI middleware in front of every route: host, CORS, the API key, bank and scope,
rate, content type and body size, then the audit entry of every write (docs/security.md).

A handler reads the caller from `request.state.principal` (engine/auth/principal.py); routes
without a bank in the path (chunks, imports) check the rows they return with
`principal.sees(bank_id)`. `/mcp/{bank_id}/...` is checked against its bank here; `/mcp/`
(banks named in tool arguments) and `/console/api/...` only need a valid key here and ask
`allows` themselves. `/console/` pages (GET) are public.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime

import asyncpg
from starlette.datastructures import Headers
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from engine.auth.audit import AuditEntry, record_audit
from engine.auth.keys import KeyVerifier, active_key_count
from engine.auth.principal import OPEN, Principal, scope_rank
from engine.settings import Settings
from engine.transfer.storage import file_bank
from server.errors import error_body
from server.rate_limit import RateLimiter
from server.services import Services

log = logging.getLogger("engram.server")

PUBLIC_PATHS = frozenset(("/health", "/ready", "/health/live", "/health/ready", "/version"))
# "/" only redirects to the console's public pages.
PUBLIC_PATHS |= {"/"}
# /metrics carries counts, never content; it is public like health so scrapers need no key.
PUBLIC_PATHS |= {"/metrics"}
READ_METHODS = frozenset(("GET", "HEAD", "OPTIONS"))
BODY_METHODS = frozenset(("POST", "PUT", "PATCH", "DELETE"))
# POST routes that only read: they answer from the memory and change nothing in it.
READING_POSTS = ("/memories/recall", "/reflect", "/dry-run-refresh", "/dry-run-extract")
BANK_ROUTE = "/v1/default/banks/{bank_id}"
# Bank management: creating, renaming, configuring or deleting a bank, and reading its audit.
ADMIN_ROUTES = {
    ("PUT", BANK_ROUTE),
    ("PATCH", BANK_ROUTE),
    ("DELETE", BANK_ROUTE),
    ("PATCH", BANK_ROUTE + "/config"),
    ("DELETE", BANK_ROUTE + "/config"),
    ("GET", BANK_ROUTE + "/audit-logs"),
    ("GET", BANK_ROUTE + "/audit-logs/stats"),
    # They create a bank (the clone, the restored one).
    ("POST", BANK_ROUTE + "/clone"),
    ("POST", BANK_ROUTE + "/transfer/import"),
    ("GET", BANK_ROUTE + "/audit-logs/{log_id}"),
}
# Multipart uploads: files to retain, transfer archives to import.
UPLOAD_ROUTES = ("/files/retain", "/transfer/import", "/document-transfer")
ARCHIVE_ROUTES = ("/transfer/import", "/document-transfer")
# A stored file names no bank in its path: the middleware scopes it by the file's bank.
FILE_DOWNLOAD = "/v1/default/files/download/{key}"
# In the default mode keys are required once one exists; how long a count is trusted.
KEY_COUNT_TTL_S = 10.0
# The audit's transport: the in-process MCP endpoint marks its calls in the ASGI scope (which
# no outside client can set); `engram mcp` (stdio) calls over HTTP and says so in a header —
# a caller's own claim about its own key's writes, recorded as such.
TRANSPORT_SCOPE_KEY = "engram.transport"
TRANSPORT_HEADER = "x-engram-transport"
DECLARED_TRANSPORTS = frozenset(("mcp",))
# Enough of a write's JSON answer to read its operation id for the audit.
AUDIT_BODY_PEEK = 65536


@dataclass(frozen=True)
class Requirement:
    """What a request needs: a key (unless public), a scope, and the bank it must see."""

    public: bool
    scope: str
    bank_id: str | None
    template: str
    audited: bool


class BodyTooLarge(Exception):
    pass


def classify(method: str, path: str, routes: list[BaseRoute], scope: Scope) -> Requirement:
    if path in PUBLIC_PATHS:
        return Requirement(True, "read", None, path, False)
    if path == "/console" or path.startswith("/console/"):
        api = path.startswith("/console/api/")
        public = not api and method in READ_METHODS
        return Requirement(public, "read", None, "/console", False)
    if path == "/mcp" or path.startswith("/mcp/"):
        # Every MCP call is a POST: the tools check write scope through the principal.
        parts = path.split("/")
        bank = parts[2] if len(parts) > 3 and parts[2] else None
        return Requirement(False, "read", bank, "/mcp/{bank_id}" if bank else "/mcp", False)
    template, bank_id = path, None
    for route in routes:
        match, child = route.matches(scope)
        if match == Match.FULL:
            template = getattr(route, "path", path)
            bank_id = child.get("path_params", {}).get("bank_id")
            break
    if (method, template) in ADMIN_ROUTES:
        needed = "admin"
    elif method in READ_METHODS or (method == "POST" and template.endswith(READING_POSTS)):
        needed = "read"
    else:
        needed = "write"
    return Requirement(False, needed, bank_id, template, needed != "read")


def _bearer(headers: Headers) -> str | None:
    value = headers.get("authorization", "")
    kind, _, token = value.partition(" ")
    if kind.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def _json_media(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


def _upload(method: str, path: str, content_type: str) -> bool:
    """File uploads (`POST .../files/retain`, archives to import) are multipart, as
    Hindsight's client sends them; a browser form can post multipart too, so only these
    routes take it."""
    media = content_type.split(";", 1)[0].strip().lower()
    return method == "POST" and path.endswith(UPLOAD_ROUTES) and media == "multipart/form-data"


def body_limit(method: str, path: str, settings: Settings) -> tuple[int, str]:
    """The most bytes a request's body may hold, and the setting that says so: archives
    uploaded for import have their own limit."""
    if method == "POST" and path.endswith(ARCHIVE_ROUTES):
        return settings.security.max_archive_bytes, "ENGRAM_MAX_ARCHIVE_BYTES"
    return settings.security.max_body_bytes, "ENGRAM_MAX_BODY_BYTES"


def _outcome(status: int) -> str:
    if status < 400:
        return "success"
    if status in (401, 403):
        return "denied"
    return "rejected" if status < 500 else "failed"


class SecurityMiddleware:
    def __init__(self, app: ASGIApp, routes: list[BaseRoute]) -> None:
        self.app = app
        self.routes = routes
        self.verifier = KeyVerifier()
        self.limiter = RateLimiter()
        self._cors: ASGIApp | None = None
        self._key_count: tuple[float, int] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        services: Services | None = getattr(scope["app"].state, "services", None)
        if services is None:  # still starting: only health answers anyway
            await self.app(scope, receive, send)
            return
        settings = services.settings
        headers = Headers(scope=scope)
        allowed = settings.security.allowed_hosts
        if allowed and not _host_allowed(headers.get("host", ""), allowed):
            await error_body(400, "invalid host header")(scope, receive, send)
            return
        if settings.security.cors_origins:
            if self._cors is None:
                self._cors = CORSMiddleware(
                    self._guarded,
                    allow_origins=list(settings.security.cors_origins),
                    allow_methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
                    allow_headers=["authorization", "content-type"],
                )
            await self._cors(scope, receive, send)
            return
        await self._guarded(scope, receive, send)

    async def _guarded(self, scope: Scope, receive: Receive, send: Send) -> None:
        services: Services = scope["app"].state.services
        settings = services.settings
        method: str = scope["method"]
        need = classify(method, scope["path"], self.routes, scope)
        if need.template == FILE_DOWNLOAD:
            need = await _file_requirement(services, scope["path"], need)
        headers = Headers(scope=scope)
        started = datetime.now(UTC)
        scope.setdefault("state", {})
        if need.public:
            scope["state"]["principal"] = OPEN
            await self.app(scope, receive, send)
            return
        principal = OPEN
        if await self._keys_required(services):
            token = _bearer(headers)
            found = None
            if token is not None:
                async with services.pool.acquire() as conn:
                    found = await self.verifier.principal(conn, token)
            if found is None:
                detail = "an API key is required" if token is None else "invalid API key"
                response = error_body(401, f"{detail} (Authorization: Bearer <key>)")
                response.headers["WWW-Authenticate"] = "Bearer"
                # Not audited: no one to name, and anyone could fill the table this way
                # (engram_http_requests_total counts them by route).
                await response(scope, receive, send)
                return
            principal = found
        scope["state"]["principal"] = principal
        refusal = _refusal(principal, need)
        if refusal is not None:
            await self._finish(services, scope, need, principal, started, refusal.status_code)
            await refusal(scope, receive, send)
            return
        if principal.key_id is not None:
            rate = principal.rate_limit_per_minute or settings.security.rate_limit_per_minute
            wait = self.limiter.acquire(principal.key_id, rate, time.monotonic())
            if wait > 0:
                response = error_body(429, f"rate limit of {rate} requests a minute exceeded")
                response.headers["Retry-After"] = str(max(1, round(wait + 0.5)))
                await response(scope, receive, send)
                return
        limited = _body_refusal(method, scope["path"], headers, settings)
        if limited is not None:
            await self._finish(services, scope, need, principal, started, limited.status_code)
            await limited(scope, receive, send)
            return
        await self._call(services, scope, receive, send, need, principal, started)

    async def _call(
        self,
        services: Services,
        scope: Scope,
        receive: Receive,
        send: Send,
        need: Requirement,
        principal: Principal,
        started: datetime,
    ) -> None:
        limit, setting = body_limit(scope["method"], scope["path"], services.settings)
        received = 0
        status = 500
        started_response = False
        peek = bytearray()

        async def counted_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge
            return message

        async def watched_send(message: Message) -> None:
            nonlocal status, started_response
            if message["type"] == "http.response.start":
                status = message["status"]
                started_response = True
            elif message["type"] == "http.response.body" and len(peek) < AUDIT_BODY_PEEK:
                peek.extend(message.get("body", b"")[: AUDIT_BODY_PEEK - len(peek)])
            await send(message)

        try:
            await self.app(scope, counted_receive, watched_send)
        except BodyTooLarge:
            if started_response:
                raise
            status = 413
            await _too_large(limit, setting)(scope, receive, send)
        finally:
            await self._finish(services, scope, need, principal, started, status, bytes(peek))

    async def _keys_required(self, services: Services) -> bool:
        mode = services.settings.security.auth
        if mode in ("keys", "off"):
            return mode == "keys"
        now = time.monotonic()
        if self._key_count is None or now - self._key_count[0] > KEY_COUNT_TTL_S:
            async with services.pool.acquire() as conn:
                self._key_count = (now, await active_key_count(conn))
        return self._key_count[1] > 0

    async def _finish(
        self,
        services: Services,
        scope: Scope,
        need: Requirement,
        principal: Principal,
        started: datetime,
        status: int,
        answer: bytes = b"",
    ) -> None:
        """The audit entry of a write, whatever became of it."""
        if not need.audited:
            return
        entry = AuditEntry(
            action=f"{scope['method']} {need.template}",
            transport=_transport(scope),
            bank_id=need.bank_id,
            key_id=principal.key_id,
            outcome=_outcome(status),
            status=status,
            started_at=started,
            ended_at=datetime.now(UTC),
            operation_id=_operation_id(answer),
            request={
                "method": scope["method"],
                "path": scope["path"],
                "query": scope.get("query_string", b"").decode("latin-1"),
            },
        )
        try:
            async with services.pool.acquire() as conn:
                await record_audit(conn, entry)
        except (asyncpg.PostgresError, OSError, RuntimeError) as exc:  # a closed pool: RuntimeError
            log.error("audit: cannot record %s on %s: %s", entry.action, entry.bank_id, exc)


async def _file_requirement(services: Services, path: str, need: Requirement) -> Requirement:
    """A download needs to see the bank its file belongs to (an unknown key: the handler's
    404)."""
    key = path.rsplit("/", 1)[-1]
    async with services.pool.acquire() as conn:
        bank_id = await file_bank(conn, key)
    return replace(need, bank_id=bank_id)


def _transport(scope: Scope) -> str:
    marked = scope.get(TRANSPORT_SCOPE_KEY)
    if isinstance(marked, str):
        return marked
    declared = Headers(scope=scope).get(TRANSPORT_HEADER, "")
    return declared if declared in DECLARED_TRANSPORTS else "http"


def _refusal(principal: Principal, need: Requirement) -> JSONResponse | None:
    if need.bank_id is not None and not principal.sees(need.bank_id):
        if need.template == FILE_DOWNLOAD:  # the key names no bank: neither does the answer
            return error_body(404, "file not found")
        return error_body(404, f"bank not found: {need.bank_id}")
    bank = need.bank_id
    if scope_rank(principal.scope) < scope_rank(need.scope) or (
        need.scope == "admin" and bank is None and principal.bank_id is not None
    ):
        where = f" on bank {bank}" if bank else ""
        return error_body(
            403, f"this key's scope ({principal.scope}) does not allow {need.scope}{where}"
        )
    return None


def _body_refusal(
    method: str, path: str, headers: Headers, settings: Settings
) -> JSONResponse | None:
    if method not in BODY_METHODS:
        return None
    length = headers.get("content-length")
    has_body = headers.get("transfer-encoding") is not None or (length not in (None, "0"))
    if not has_body:
        return None
    limit, setting = body_limit(method, path, settings)
    if length is not None and length.isdigit() and int(length) > limit:
        return _too_large(limit, setting)
    content_type = headers.get("content-type", "")
    if not _json_media(content_type) and not _upload(method, path, content_type):
        return error_body(
            415,
            f"content-type must be application/json, got {content_type or 'none'!r}",
            "content-type",
        )
    return None


def _too_large(limit: int, setting: str) -> JSONResponse:
    return error_body(413, f"request body exceeds the limit of {limit} bytes ({setting})", "body")


def _host_allowed(host: str, allowed: tuple[str, ...]) -> bool:
    name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    name = name.strip("[]").lower()
    for pattern in (p.lower() for p in allowed):
        if pattern in ("*", name):
            return True
        if pattern.startswith("*.") and name.endswith(pattern[1:]):
            return True
    return False


def _operation_id(answer: bytes) -> str | None:
    if not answer or not answer.lstrip().startswith(b"{"):
        return None
    try:
        data = json.loads(answer)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    value = data.get("operation_id") if isinstance(data, dict) else None
    return value if isinstance(value, str) else None
