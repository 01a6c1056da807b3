"""uvicorn's HTTP protocol with a deadline for each request's head (its line and headers).

uvicorn's keep-alive timeout starts when a response ends and stops at the next byte, so a
client that sends a header a byte at a time (or nothing at all on a new connection) holds the
connection, and its file descriptor, for as long as it likes; ASGI middleware cannot help, as
the app is only called once the head is complete. Here a timer starts when a connection opens
and whenever it waits for a next request, and the connection is closed if the request's head
is not complete when it fires. Reading a body and running the request are not timed here
(``--request-timeout`` bounds the work).
"""

from __future__ import annotations

import asyncio
import logging

from contextvec.extras import needs

with needs("server"):
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

logger = logging.getLogger("contextvec.server")


class HeaderDeadline(HttpToolsProtocol):
    """``HttpToolsProtocol`` (uvicorn's default parser) that closes a connection whose next
    request's head is not complete within :attr:`header_timeout` seconds of the connection
    opening or the last response ending."""

    header_timeout: float = 10.0
    _head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def on_headers_complete(self) -> None:
        self._disarm()
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        # Waiting for the next request (not running a pipelined one, whose head is in).
        if not self.transport.is_closing() and (self.cycle is None or self.cycle.response_complete):
            self._arm()

    def _arm(self) -> None:
        self._disarm()
        self._head_timer = self.loop.call_later(self.header_timeout, self._head_timed_out)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if not self.transport.is_closing():
            logger.debug("closed a connection whose request head took over %g s", self.header_timeout)
            self.transport.close()


def header_deadline(seconds: float) -> type[HeaderDeadline]:
    """The protocol class for ``uvicorn.Config(http=...)`` with a head deadline of ``seconds``."""
    return type("HeaderDeadline", (HeaderDeadline,), {"header_timeout": seconds})
