"""An ASGI middleware that caps request bodies before anything reads them, on every route.

A body announced larger than the cap (Content-Length) is answered 413 before a byte of it is read. A
body without a length (chunked) is counted as it streams; past the cap the application sees the
request end with an error and the client gets 413 (if nothing was sent yet). Authentication comes
later in the stack, so this holds with or without a token: nobody can make the server hold more than
the cap of one request in memory.
"""

from starlette.types import ASGIApp, Message, Receive, Scope, Send

MCP_BODY_BYTES = 8 * 1024 * 1024  # a whole train.py (200,000 characters) escaped as JSON, with room
DASHBOARD_BODY_BYTES = 16 * 1024  # the login form


class BodyTooLarge(Exception):
    pass


class BodyLimit:
    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope.get("headers") or ()).get(b"content-length")
        if length is not None and (not length.strip().isdigit() or int(length) > self.max_bytes):
            await _too_large(send, self.max_bytes)
            return
        received = 0
        over = False
        started = False

        async def counting_receive() -> Message:
            nonlocal received, over
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    over = True
                    raise BodyTooLarge
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if over:
                return  # whatever the application answers to the error, the client gets the 413
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counting_receive, guarded_send)
        except BodyTooLarge:
            pass
        except Exception:
            if not over:
                raise
        if over and not started:
            await _too_large(send, self.max_bytes)


async def _too_large(send: Send, max_bytes: int) -> None:
    body = f"request body over {max_bytes} bytes\n".encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
