"""A deadline on each request's headers: the defence against slow-loris clients.

aiohttp closes a connection that stays silent, but a client that dribbles header bytes one at
a time holds its connection (and a slot of the API server's webhook budget) for as long as it
likes. Each connection here wraps aiohttp's protocol: the first byte of a request starts a
clock, the route marks the headers as received, and a connection still without complete
headers when the clock runs out is dropped. Bodies have their own timeout in the route.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from aiohttp import web


class HeaderDeadline(asyncio.Protocol):
    """Forwards everything to aiohttp's protocol and drops the connection on a late header."""

    def __init__(self, inner: asyncio.Protocol, timeout: float) -> None:
        self.inner = inner
        self.timeout = timeout
        self.transport: asyncio.Transport | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._awaiting_headers = True

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self._awaiting_headers and self._timer is None:
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(self.timeout, self._expired)
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received()

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel()
        self.inner.connection_lost(exc)

    def headers_received(self) -> None:
        self._awaiting_headers = False
        self._cancel()

    def request_done(self) -> None:
        # Bytes that arrive from now on belong to the next request on this connection.
        self._awaiting_headers = True

    def _cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expired(self) -> None:
        self._timer = None
        if self._awaiting_headers and self.transport is not None:
            self.transport.abort()


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def mark_headers(request: web.Request, handler: Handler) -> web.StreamResponse:
    """aiohttp calls the route only once the headers are parsed: stop the clock there."""
    transport = request.transport
    guard = transport.get_protocol() if transport is not None else None
    if not isinstance(guard, HeaderDeadline):
        return await handler(request)  # served without the wrapper (tests' in-process server)
    guard.headers_received()
    try:
        return await handler(request)
    finally:
        guard.request_done()
