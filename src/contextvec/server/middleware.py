"""Pure ASGI middleware, outermost first: request id + metrics, the ``Host`` check, CORS (only
with origins named: Starlette's ``CORSMiddleware``, added by the app), API key, body reading
(JSON content type, size limit, UTF-8).

Plain ASGI (not Starlette's BaseHTTPMiddleware) so a client's disconnect still reaches the
handler and nothing is buffered twice. Everything runs in front of the hot routes, which answer
on raw ASGI: no request reaches a handler unchecked.
"""

from __future__ import annotations

import asyncio
import hmac
import itertools
import os
import time
from collections.abc import Sequence

from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from contextvec.server.errors import error_bytes
from contextvec.server.metrics import Metrics

OPEN_PATHS = {"/health", "/"}
"""Paths that need no API key: liveness probes, and the explorer page (it holds no data; every
call it makes needs the key)."""

OPEN_PREFIX = "/static/"
"""The explorer page's files (script, style, charting library): no API key needed either."""


async def send_json(send: Send, status: int, body: bytes,
                    headers: list[tuple[bytes, bytes]] | None = None) -> None:
    """A whole JSON response: start (with its length) and body."""
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()), *(headers or [])]})
    await send({"type": "http.response.body", "body": body})


async def send_error(send: Send, status: int, message: str,
                     headers: list[tuple[bytes, bytes]] | None = None, param: str | None = None) -> None:
    await send_json(send, status, error_bytes(status, message, param), headers)


class RequestContext:
    """Gives each request an id (``X-Request-ID``), counts it and times it."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app, self.metrics = app, metrics
        # Ids: a random prefix per server and a counter (unique, and cheaper than a uuid4).
        self._prefix = os.urandom(4).hex()
        self._count = itertools.count()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = f"{self._prefix}{next(self._count) & 0xFFFFFFFF:08x}"
        scope.setdefault("state", {})["request_id"] = request_id
        start = time.perf_counter()
        status = 500

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [*message.get("headers", []),
                                      (b"x-request-id", request_id.encode())]
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            self.metrics.observe_request(scope["path"], status, time.perf_counter() - start)


class HostCheck:
    """400 for a request whose ``Host`` is none of ``allowed`` (patterns of Starlette's
    ``TrustedHostMiddleware``, which matches them): a page that DNS rebinding points at this
    server sends its own name, and is refused before the API sees it."""

    def __init__(self, app: ASGIApp, allowed: Sequence[str]) -> None:
        self.app, self.allowed = app, ", ".join(allowed)
        # Starlette's check decides; its plain-text refusal gives way to the API's JSON error.
        self._check = TrustedHostMiddleware(_mark_allowed, allowed_hosts=list(allowed), www_redirect=False)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await self._check(scope, receive, _discard)
            if not scope.pop(_HOST_ALLOWED, False):
                host = dict(scope["headers"]).get(b"host", b"").decode("latin-1")
                said = f"Host {host[:100]!r}" if host else "no Host header"
                await send_error(send, 400, f"{said}: this server answers to {self.allowed} only "
                                            "(add names with --allowed-hosts)", param="host")
                return
        await self.app(scope, receive, send)


_HOST_ALLOWED = "contextvec.host_allowed"


async def _mark_allowed(scope: Scope, receive: Receive, send: Send) -> None:
    scope[_HOST_ALLOWED] = True


async def _discard(message: Message) -> None:
    pass


class ApiKey:
    """``Authorization: Bearer KEY`` on every path but :data:`OPEN_PATHS`, compared in constant time."""

    def __init__(self, app: ASGIApp, api_key: str) -> None:
        self.app = app
        self.expected = api_key.encode("utf-8")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] == "http" and path not in OPEN_PATHS and not path.startswith(OPEN_PREFIX):
            scheme, _, token = dict(scope["headers"]).get(b"authorization", b"").partition(b" ")
            # The scheme is case-insensitive (RFC 9110); the key is compared in constant time.
            if scheme.lower() != b"bearer" or not hmac.compare_digest(token.strip(), self.expected):
                await send_error(send, 401, "missing or wrong API key: send 'Authorization: Bearer KEY'",
                                 [(b"www-authenticate", b"Bearer")])
                return
        await self.app(scope, receive, send)


class BodyReader:
    """415 for a body not declared ``Content-Type: application/json``; 413 for one over
    ``max_bytes``, declared (Content-Length) or streamed (chunked); 422 for one that is not
    UTF-8. A browser sends a page's cross-origin ``text/plain`` or form body without asking
    first (no CORS preflight); JSON it sends only once the server's CORS answer allows it.

    The body is read here, up to the limit, and replayed to the app; later ``receive`` calls go
    to the server, so the app still learns of a disconnect. A body that has not arrived whole
    within ``timeout`` seconds is a 408 and its connection closed: a client that trickles its
    body holds nothing for longer than a request may take.
    """

    def __init__(self, app: ASGIApp, max_bytes: int, timeout: float) -> None:
        self.app, self.max_bytes, self.timeout = app, max_bytes, timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        kind = headers.get(b"content-type", b"").decode("latin-1")
        if kind.partition(";")[0].strip().lower() != "application/json":
            said = f"not {kind[:60]!r}" if kind else "none was sent"
            await send_error(send, 415, f"Content-Type must be application/json ({said})",
                             [(b"connection", b"close")], param="content-type")
            return
        too_large = f"request body over the limit of {self.max_bytes} bytes (--max-body-bytes)"
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await send_error(send, 413, too_large, [(b"connection", b"close")])
            return
        chunks, size = [], 0
        try:
            async with asyncio.timeout(self.timeout):
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        return
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    if size > self.max_bytes:
                        await send_error(send, 413, too_large, [(b"connection", b"close")])
                        return
                    chunks.append(chunk)
                    if not message.get("more_body", False):
                        break
        except TimeoutError:
            await send_error(send, 408, f"the request body did not arrive within {self.timeout:g} s "
                             "(--request-timeout)", [(b"connection", b"close")], param="body")
            return
        body = b"".join(chunks)
        try:
            body.decode("utf-8")
        except UnicodeDecodeError as e:
            await send_error(send, 422, f"malformed JSON: the body is not valid UTF-8 (byte {e.start})",
                             param="body")
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)
