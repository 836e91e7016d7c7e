"""A deadline on each HTTP request's headers, for clients that trickle them.

uvicorn closes a connection that stays idle between requests (its keep-alive timeout), but any byte
cancels that, and nothing bounds the time a request's headers take: a client sending one header line
every few seconds held its connection, and whatever the server keeps per connection, for as long as it
liked. Here the headers of each request must be complete within `timeout_s` of the connection opening
or of the request's first byte; otherwise the client is answered 408 and the connection closed. A
request's body has its own deadline (body_limit.py); a response may take as long as it takes (an
experiment can run for minutes).
"""

import asyncio

from uvicorn.protocols.http.h11_impl import H11Protocol

HEADER_TIMEOUT_S = 10.0
REQUEST_TIMEOUT = b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"


def h11_with_header_deadline(timeout_s: float = HEADER_TIMEOUT_S) -> type[H11Protocol]:
    """uvicorn's h11 protocol with the deadline (pass it as uvicorn's `http`)."""

    class HeaderDeadline(H11Protocol):
        _header_timer: asyncio.TimerHandle | None = None

        def _between_requests(self) -> bool:
            return self.cycle is None or self.cycle.response_complete

        def _arm(self) -> None:
            if self._header_timer is None:
                self._header_timer = self.loop.call_later(timeout_s, self._headers_too_slow)

        def _disarm(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            if self._between_requests():
                self._arm()  # a new request begins: its headers are on the clock
            super().data_received(data)
            if not self._between_requests():
                self._disarm()  # its headers are in: a request is being served

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _headers_too_slow(self) -> None:
            self._header_timer = None
            if self._between_requests() and not self.transport.is_closing():
                self.transport.write(REQUEST_TIMEOUT)
                self.transport.close()

    return HeaderDeadline
