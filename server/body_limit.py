"""An ASGI middleware that caps request bodies before anything reads them, on every route: in size,
and in the time they take to arrive.

A body announced larger than the cap (Content-Length) is answered 413 before a byte of it is read. A
body without a length (chunked) is counted as it streams; past the cap the application sees the
request end with an error and the client gets 413 (if nothing was sent yet). A body that has not all
arrived within `timeout_s` of the request's headers is answered 408 the same way: a client that
trickles its body (a byte now and then) would otherwise hold its request, and the server's part of it,
open forever. Once the body is in, nothing is timed: a response may stream for as long as it needs.
Authentication comes later in the stack, so this holds with or without a token: nobody can make the
server hold more than the cap of one request in memory, or hold it for longer than the deadline.
"""

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

MCP_BODY_BYTES = 8 * 1024 * 1024  # a whole train.py (200,000 characters) escaped as JSON, with room
DASHBOARD_BODY_BYTES = 16 * 1024  # the login form
BODY_TIMEOUT_S = 30.0  # the whole 8 MB cap at about 270 KB/s


class BodyTooLarge(Exception):
    pass


class BodyTooSlow(Exception):
    pass


class BodyLimit:
    def __init__(self, app: ASGIApp, max_bytes: int, timeout_s: float = BODY_TIMEOUT_S) -> None:
        self.app, self.max_bytes, self.timeout_s = app, max_bytes, timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope.get("headers") or ()).get(b"content-length")
        if length is not None and (not length.strip().isdigit() or int(length) > self.max_bytes):
            await _refuse(send, 413, f"request body over {self.max_bytes} bytes")
            return
        received = 0
        over = slow = body_done = False
        started = False
        deadline = anyio.current_time() + self.timeout_s

        async def counting_receive() -> Message:
            nonlocal received, over, slow, body_done
            if body_done:  # e.g. waiting for the client to disconnect while a response streams
                return await receive()
            with anyio.move_on_after(deadline - anyio.current_time()):
                message = await receive()
                if message["type"] == "http.request":
                    received += len(message.get("body", b""))
                    if received > self.max_bytes:
                        over = True
                        raise BodyTooLarge
                    body_done = not message.get("more_body", False)
                else:
                    body_done = True
                return message
            slow = True
            raise BodyTooSlow

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if over or slow:
                return  # whatever the application answers to the error, the client gets 413 or 408
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counting_receive, guarded_send)
        except (BodyTooLarge, BodyTooSlow):
            pass
        except Exception:
            if not (over or slow):
                raise
        if over and not started:
            await _refuse(send, 413, f"request body over {self.max_bytes} bytes")
        elif slow and not started:
            await _refuse(send, 408, f"request body not received within {self.timeout_s:g} s")


async def _refuse(send: Send, status: int, text: str) -> None:
    body = f"{text}\n".encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
