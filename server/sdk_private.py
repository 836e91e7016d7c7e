"""The two private fields of mcp 2.3.0 this server relies on, each in one place (notify.py serves the
handshake-era methods with them; stdio.py runs the lowlevel server behind its guarded stdin)."""

from typing import Any

from mcp.server import MCPServer
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server


def lowlevel(mcp: MCPServer) -> Server[Any]:
    # MCPServer has no public way to serve the handshake-era methods the 2026 revision removed
    # (logging/setLevel, resources/subscribe), nor to run over streams it did not open itself; the SDK's
    # own docs (MethodBinding) point to the lowlevel Server, which MCPServer keeps as a private field.
    return mcp._lowlevel_server


def connection_of(ctx: ServerRequestContext[Any, Any]) -> Connection:
    # A request context has no public handle on its connection: ctx.session is a new proxy per request,
    # while the Connection lives exactly as long as the client's connection and owns its channel.
    return ctx.session._connection
