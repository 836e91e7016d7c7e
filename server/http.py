"""The streamable HTTP app (`serve --transport http`): MCP at /mcp, bearer auth, DNS-rebinding guard.

Binding anything but loopback requires a bearer token. With a token, /mcp answers 401 to requests
without it (the SDK's TokenVerifier + AuthSettings). Host/Origin checking stays on for every bind
address; `allowed_hosts` admits real host names. Other routes (the dashboard) are added with
`extra_routes` or `routes_factory`; note that only /mcp is behind the token and the Host check.
"""

import hmac
import ipaddress
import logging
import os
import socket
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import anyio
import uvicorn
from mcp.server.auth.provider import AccessToken, TokenVerifier
from mcp.server.auth.settings import AuthSettings
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import AnyHttpUrl
from starlette.applications import Starlette
from starlette.routing import BaseRoute

from autoresearch_mcp.contract.env import ENV_TOKEN
from autoresearch_mcp.contract.errors import ResearchError
from autoresearch_mcp.server.body_limit import BODY_TIMEOUT_S, MCP_BODY_BYTES, BodyLimit
from autoresearch_mcp.server.build import build_server
from autoresearch_mcp.server.heap import settled
from autoresearch_mcp.server.http_timeouts import HEADER_TIMEOUT_S, h11_with_header_deadline
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.settings import ServerSettings

log = logging.getLogger(__name__)

MCP_PATH = "/mcp"
DASHBOARD_PATH = "/dashboard"
SCOPE = "autoresearch"
MIN_TOKEN_CHARS = 16
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
STARTUP_FAILURE = 3  # uvicorn's exit status for a server that could not start


class StaticTokenVerifier(TokenVerifier):
    """One shared bearer token for the team (compared in constant time)."""

    def __init__(self, token: str) -> None:
        self._token = token.encode()

    async def verify_token(self, token: str) -> AccessToken | None:
        if hmac.compare_digest(token.encode(), self._token):
            return AccessToken(token=token, client_id="autoresearch-client", scopes=[SCOPE])
        return None


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def transport_security(host: str, allowed_hosts: Sequence[str]) -> TransportSecuritySettings:
    """Host/Origin allow-list: loopback, the bind address when it is a specific one, and named hosts."""
    names = [*LOOPBACK_NAMES, *allowed_hosts]
    if host not in ("0.0.0.0", "::", "") and not is_loopback(host):
        names.append(f"[{host}]" if ":" in host else host)
    hosts, origins = [], []
    for name in dict.fromkeys(names):
        hosts += [name, f"{name}:*"]  # behind a proxy on the default port the Host has no port
        origins += [f"{scheme}://{name}{port}" for scheme in ("http", "https") for port in ("", ":*")]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )


def build_http_app(
    settings: ServerSettings,
    *,
    host: str = "127.0.0.1",
    token: str | None = None,
    allowed_hosts: Sequence[str] = (),
    extra_routes: Sequence[BaseRoute] = (),
    routes_factory: Callable[[Research], Sequence[BaseRoute]] | None = None,
    body_timeout_s: float = BODY_TIMEOUT_S,
) -> Starlette:
    """The Starlette app serving MCP at /mcp, plus `extra_routes` and `routes_factory(research)`.
    A request's body must arrive within `body_timeout_s` (body_limit.py).

    `app.state` carries `research` (closed when the app shuts down), `mcp`, `token_required` and
    `transport_security` for the added routes to use."""
    if not is_loopback(host) and not token:
        raise ResearchError(
            f"refusing to serve on {host} without a bearer token: anyone who can reach it could run "
            f"code. Pass --token or set {ENV_TOKEN} (or bind 127.0.0.1)."
        )
    if token is not None and len(token) < MIN_TOKEN_CHARS:
        raise ResearchError(
            f"the bearer token is too short ({len(token)} characters; use at least {MIN_TOKEN_CHARS}, "
            "e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))')"
        )
    verifier = auth = None
    if token:
        verifier = StaticTokenVerifier(token)
        auth = AuthSettings(
            issuer_url=AnyHttpUrl("http://127.0.0.1/"),  # required by the SDK; no OAuth server is involved
            resource_server_url=None,
            required_scopes=[SCOPE],
            validate_token_resource=False,
        )
    research = Research(settings).open()
    mcp = build_server(research, token_verifier=verifier, auth=auth)
    security = transport_security(host, allowed_hosts)
    app = mcp.streamable_http_app(streamable_http_path=MCP_PATH, transport_security=security, host=host)
    # every route, before auth reads anything
    app.add_middleware(BodyLimit, max_bytes=MCP_BODY_BYTES, timeout_s=body_timeout_s)
    app.router.routes.extend(extra_routes)
    if routes_factory is not None:
        app.router.routes.extend(routes_factory(research))
    mcp_lifespan = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with mcp_lifespan(app):
            try:
                with settled():  # once the app is up: what it holds now lives as long as it serves
                    yield
            finally:  # uvicorn re-raises SIGTERM after shutdown: close the job workers here
                await anyio.to_thread.run_sync(research.close)

    app.router.lifespan_context = lifespan
    app.state.research = research
    app.state.mcp = mcp
    app.state.token_required = verifier is not None
    app.state.transport_security = security
    return app


def dashboard_routes(
    token: str | None, security: TransportSecuritySettings
) -> Callable[[Research], Sequence[BaseRoute]]:
    """The run dashboard at /dashboard/: it checks the token itself (a login page and an HttpOnly cookie,
    or the bearer header) and gets the same Host allow-list as /mcp, since nothing in front checks it."""
    from starlette.routing import Mount

    from autoresearch_mcp.server.dashboard import dashboard_app

    hosts = [name for name in security.allowed_hosts if not name.endswith(":*")]
    return lambda research: [
        Mount(DASHBOARD_PATH, app=dashboard_app(research.store, token, allowed_hosts=hosts))
    ]


def serve_http(
    settings: ServerSettings,
    *,
    host: str,
    port: int,
    token: str | None = None,
    allowed_hosts: Sequence[str] = (),
    port_file: Path | None = None,
) -> None:
    """Serve until stopped. Port 0 leaves the choice to the system; the server then says which port it
    got, in its log and in `port_file` (written once it listens, removed when it stops)."""
    token = token or os.environ.get(ENV_TOKEN) or None
    dashboard = dashboard_routes(token, transport_security(host, allowed_hosts))
    app = build_http_app(
        settings, host=host, token=token, allowed_hosts=allowed_hosts, routes_factory=dashboard
    )
    server = ListeningServer(uvicorn_config(app, host, port), port_file=port_file, token_required=bool(token))
    with suppress(KeyboardInterrupt):  # Ctrl-C: uvicorn shuts down, then raises it again
        server.run()
    if not server.started:  # as uvicorn.run: a server that never listened is a failed start
        sys.exit(STARTUP_FAILURE)


class ListeningServer(uvicorn.Server):
    """uvicorn's server, saying where it listens once it does: with --port 0 only the server knows the
    port, and a client (a test, a script) reads it from `port_file` instead of guessing a free one,
    which another process could take first."""

    def __init__(self, config: uvicorn.Config, *, port_file: Path | None, token_required: bool) -> None:
        super().__init__(config)
        self.port_file = port_file
        self.token_required = token_required

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        port = self.servers[0].sockets[0].getsockname()[1]
        base = f"http://{self.config.host}:{port}"
        log.info(
            "serving MCP at %s%s (%s)",
            base,
            MCP_PATH,
            "bearer token required" if self.token_required else "no token: loopback only",
        )
        log.info("run dashboard at %s%s/", base, DASHBOARD_PATH)
        if self.port_file is not None:
            partial = self.port_file.with_name(self.port_file.name + ".partial")
            partial.write_text(f"{port}\n")
            partial.replace(self.port_file)  # a reader sees the whole number or no file

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        if self.port_file is not None:
            self.port_file.unlink(missing_ok=True)
        await super().shutdown(sockets)


def uvicorn_options(host: str, port: int, header_timeout_s: float = HEADER_TIMEOUT_S) -> dict[str, Any]:
    """How the app is served: h11 with a deadline on each request's headers (http_timeouts.py)."""
    return {
        "host": host,
        "port": port,
        "log_level": "warning",
        "http": h11_with_header_deadline(header_timeout_s),
    }


def uvicorn_config(
    app: Starlette, host: str, port: int, header_timeout_s: float = HEADER_TIMEOUT_S
) -> uvicorn.Config:
    return uvicorn.Config(app, **uvicorn_options(host, port, header_timeout_s))
