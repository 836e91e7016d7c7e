"""stdio, as hosts start the server: the SDK's transport, with two guards in front of what it reads.

- A line that is not a JSON-RPC message gets an answer: a parse error (-32700) when it is not JSON, an
  invalid request (-32600, with the line's id when it has one) when it is JSON but no message. The SDK
  only logs such a line, and the client waited for an answer forever.
- A line is at most MAX_LINE_BYTES (an HTTP body's cap): past that, the rest of the line is read in
  chunks and dropped, never held, and the client is told. The SDK read a whole line before looking at
  it: a 50 MB line cost +100 MB.

Like the SDK's own stdin, the one read here is a private duplicate of fd 0, with fd 0 itself pointed at
the null device while the server runs: whatever the server starts reads nothing of the protocol.
"""

import fcntl
import json
import os
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any, BinaryIO

import anyio
from anyio.streams.memory import MemoryObjectSendStream
from mcp.server import MCPServer
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp.types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError, jsonrpc_message_adapter
from pydantic import ValidationError

from autoresearch_mcp.server.body_limit import MCP_BODY_BYTES
from autoresearch_mcp.server.sdk_private import lowlevel

MAX_LINE_BYTES = MCP_BODY_BYTES
CHUNK = 1 << 16


class GuardedLines:
    """stdin as the SDK's stdio transport iterates it (text lines), less what must not reach it."""

    def __init__(self, source: BinaryIO, max_bytes: int = MAX_LINE_BYTES) -> None:
        self._source = source
        self.max_bytes = max_bytes
        self._answer: MemoryObjectSendStream[Any] | None = None
        self._ready = anyio.Event()

    def answer_on(self, stream: MemoryObjectSendStream[Any]) -> None:
        """Where errors go: the transport's outgoing stream (known once it is open)."""
        self._answer = stream
        self._ready.set()

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        await self._ready.wait()
        while line := await self._readline(self.max_bytes + 1):
            if len(line) > self.max_bytes and not line.endswith(b"\n"):
                while (rest := await self._readline(CHUNK)) and not rest.endswith(b"\n"):
                    pass  # the rest of the line, dropped as it comes
                await self._refuse(
                    None, PARSE_ERROR, f"Parse error: a message is at most {self.max_bytes} bytes"
                )
                continue
            text = line.decode("utf-8", errors="replace")
            if not text.strip():
                continue
            try:
                jsonrpc_message_adapter.validate_json(text, by_name=False)
            except ValidationError:
                await self._refuse(*_problem(text))
                continue
            yield text

    async def _readline(self, limit: int) -> bytes:
        """At most `limit` bytes, up to and with the next newline (read in a worker thread)."""
        return await anyio.to_thread.run_sync(self._source.readline, limit)

    async def _refuse(self, request_id: str | int | None, code: int, message: str) -> None:
        assert self._answer is not None
        error = JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=code, message=message))
        await self._answer.send(SessionMessage(error))


def _problem(text: str) -> tuple[str | int | None, int, str]:
    """Why a line is no message, and the id to answer it with (when it has one)."""
    try:
        value = json.loads(text)
    except ValueError:
        return None, PARSE_ERROR, "Parse error: the line is not JSON"
    request_id = value.get("id") if isinstance(value, dict) else None
    if isinstance(request_id, bool) or not isinstance(request_id, str | int):
        request_id = None
    return request_id, INVALID_REQUEST, "Invalid Request: not a JSON-RPC 2.0 message"


@contextmanager
def claimed_stdin() -> Iterator[BinaryIO]:
    """A private duplicate of fd 0 to read the protocol from; fd 0 reads the null device meanwhile."""
    try:
        private = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    except OSError:  # no usable fd 0 (an embedding host): read sys.stdin as it is
        yield sys.stdin.buffer
        return
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    try:
        with os.fdopen(private, "rb", closefd=False) as source:
            yield source
    finally:
        os.dup2(private, 0)
        os.close(private)


async def serve_stdio(mcp: MCPServer, max_line_bytes: int = MAX_LINE_BYTES) -> None:
    """Serve `mcp` over stdin and stdout until stdin ends."""
    with claimed_stdin() as source:
        lines = GuardedLines(source, max_line_bytes)
        async with stdio_server(stdin=lines) as (read_stream, write_stream):  # type: ignore[arg-type]
            lines.answer_on(write_stream)
            server = lowlevel(mcp)
            await server.run(read_stream, write_stream, server.create_initialization_options())
