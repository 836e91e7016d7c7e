"""`subscriptions/listen` (the 2026-07-28 protocol) under the bounds a handshake connection's subscriptions
have (notify.py): at most MAX_SUBSCRIPTIONS resource URIs per stream, each of at most MAX_URI_CHARS
characters, and a few streams open at once per client.

The SDK's ListenHandler takes any number of URIs of any length, and up to 1024 streams in all: 40 streams
of 300 URIs of 3,031 characters took a server from 138 to 241 MB, which it kept after they closed. A
stream here is refused before its acknowledgement, with the bound it passed, and then served by the SDK's
own handler. On this protocol there are no sessions: a client is known by what the transport shows, its
credential and the address it connects from over HTTP (a shared token is one credential for everyone, so
clients behind one address share a bound), its connection over stdio or in memory.
"""

import threading
from collections import Counter
from collections.abc import Hashable
from typing import Any, Final

from mcp.server import MCPServer
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.context import ServerRequestContext
from mcp.server.subscriptions import ListenHandler, SubscriptionBus
from mcp.shared.exceptions import MCPError
from mcp.types import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    SubscriptionsListenRequestParams,
    SubscriptionsListenResult,
)

from autoresearch_mcp.server.notify import MAX_SUBSCRIPTIONS, MAX_URI_CHARS
from autoresearch_mcp.server.sdk_private import connection_of, lowlevel

MAX_STREAMS_PER_CLIENT: Final = 4  # a host follows a few runs on one stream; a few to spare
MAX_STREAMS: Final = 128  # everyone's together


class BoundedListen:
    """The handler of `subscriptions/listen`: the bounds, then the SDK's ListenHandler on `bus`."""

    def __init__(self, bus: SubscriptionBus) -> None:
        self._serve = ListenHandler(bus, max_subscriptions=MAX_STREAMS)
        self._open: Counter[Hashable] = Counter()
        self._lock = threading.Lock()

    def install(self, mcp: MCPServer) -> None:
        lowlevel(mcp).add_request_handler("subscriptions/listen", SubscriptionsListenRequestParams, self)

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], params: SubscriptionsListenRequestParams
    ) -> SubscriptionsListenResult:
        uris = params.notifications.resource_subscriptions or []
        if len(uris) > MAX_SUBSCRIPTIONS:
            raise MCPError(INVALID_PARAMS, f"listen to at most {MAX_SUBSCRIPTIONS} resource URIs on a stream")
        if any(len(uri) > MAX_URI_CHARS for uri in uris):
            raise MCPError(INVALID_PARAMS, f"listen to resource URIs of at most {MAX_URI_CHARS} characters")
        client = _client(ctx)
        with self._lock:
            if self._open[client] >= MAX_STREAMS_PER_CLIENT:
                raise MCPError(
                    INVALID_REQUEST,
                    f"this client has {MAX_STREAMS_PER_CLIENT} listen streams open, the most it may: "
                    "close one first",
                )
            self._open[client] += 1
        try:
            return await self._serve(ctx, params)
        finally:
            with self._lock:
                self._open[client] -= 1
                if not self._open[client]:
                    del self._open[client]


def _client(ctx: ServerRequestContext[Any, Any]) -> Hashable:
    """Who asks, as far as the transport can tell."""
    request = ctx.request
    if request is None:  # stdio or in memory: the connection is the client
        return ("connection", id(connection_of(ctx)))
    token = get_access_token()
    peer = request.client.host if getattr(request, "client", None) else ""
    return ("http", token.client_id if token is not None else "", peer)
