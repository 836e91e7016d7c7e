"""Who gets through to /mcp on a public server (`--host 0.0.0.0`, a bearer token, one `--allowed-host`):
the real server as a subprocess, asked with raw HTTP so that every header is exactly what a table row
says. The token is checked first (401), then the Host (421), then the Origin (403): server/http.py and
the SDK's BearerAuthBackend and TransportSecurityMiddleware, which it configures."""

import base64
import http.client
import json
from collections.abc import Iterator

import pytest
from test_http import INITIALIZE, TOKEN, call, connect

from conftest import COVTYPE_FIXTURE
from http_servers import serving_process

ALLOWED = "research.example.org"
BEARER = f"Bearer {TOKEN}"


@pytest.fixture(scope="module")
def port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """One server for the whole table: each row is one request, and none changes what the next sees."""
    tmp = tmp_path_factory.mktemp("public")
    args = ("--host", "0.0.0.0", "--allowed-host", ALLOWED)
    with serving_process(tmp / "runs.db", COVTYPE_FIXTURE, tmp / "data", *args, AUTORESEARCH_TOKEN=TOKEN) as (
        bound,
        _proc,
    ):
        yield bound


def status(port: int, headers: list[tuple[str, str]], path: str = "/mcp") -> int:
    """POST an initialize request with exactly these headers (Host included, when given) and return the
    status code."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        names = {name.lower() for name, _ in headers}
        conn.putrequest("POST", path, skip_host="host" in names, skip_accept_encoding=True)
        body = json.dumps(INITIALIZE).encode()
        base = [
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("Content-Length", str(len(body))),
        ]
        for name, value in base + headers:
            conn.putheader(name, value)
        conn.endheaders(body)
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def basic(credentials: str) -> str:
    return "Basic " + base64.b64encode(credentials.encode()).decode()


# (what the client sends, the Authorization headers, the path, the answer)
TOKENS = [
    ("no Authorization header", [], "/mcp", 401),
    ("the token", [BEARER], "/mcp", 200),
    # The scheme is case-insensitive (RFC 7235); the SDK compares it lower-cased.
    ("the token, scheme bearer", [f"bearer {TOKEN}"], "/mcp", 200),
    ("the token, scheme BEARER", [f"BEARER {TOKEN}"], "/mcp", 200),
    ("a wrong token", ["Bearer wrong-token-0123456789abcdef"], "/mcp", 401),
    ("the token upper-cased", [f"Bearer {TOKEN.upper()}"], "/mcp", 401),
    ("the token less its last character", [f"Bearer {TOKEN[:-1]}"], "/mcp", 401),
    ("the token and one more character", [f"Bearer {TOKEN}0"], "/mcp", 401),
    ("the token with a space inside", [f"Bearer {TOKEN[:8]} {TOKEN[8:]}"], "/mcp", 401),
    # The token is what follows "Bearer " exactly: a second space makes it another token.
    ("two spaces after the scheme", [f"Bearer  {TOKEN}"], "/mcp", 401),
    ("a tab after the scheme", [f"Bearer\t{TOKEN}"], "/mcp", 401),
    # Whitespace around a header's value is not part of it (RFC 9110 5.5): h11 strips it.
    ("the token with trailing whitespace", [f"{BEARER}  "], "/mcp", 200),
    ("the token without a scheme", [TOKEN], "/mcp", 401),
    ("the token under another scheme", [f"Token {TOKEN}"], "/mcp", 401),
    ("Basic with the token", [basic(TOKEN)], "/mcp", 401),
    ("Basic with the token as password", [basic(f"user:{TOKEN}")], "/mcp", 401),
    ("the token in the query string", [], f"/mcp?access_token={TOKEN}", 401),
    ("the token in the query string, as token", [], f"/mcp?token={TOKEN}", 401),
    # Only the first Authorization header counts.
    ("a wrong token, then the token", ["Bearer wrong-token-0123456789abcdef", BEARER], "/mcp", 401),
]


@pytest.mark.parametrize(
    ("authorizations", "path", "expected"), [row[1:] for row in TOKENS], ids=[row[0] for row in TOKENS]
)
def test_only_the_bearer_token_in_the_authorization_header_opens_mcp(
    port: int, authorizations: list[str], path: str, expected: int
):
    assert status(port, [("Authorization", value) for value in authorizations], path) == expected


# (the Host header, the answer): with the token, so that only the Host decides.
HOSTS = [
    ("127.0.0.1:{port}", 200),
    ("localhost:{port}", 200),
    ("[::1]:{port}", 200),
    (ALLOWED, 200),  # behind a proxy on the default port, the Host has no port
    (f"{ALLOWED}:{{port}}", 200),
    ("evil.example.com", 421),
    ("evil.example.com:{port}", 421),
    (f"{ALLOWED}.evil.example.com", 421),
    (f"evil.{ALLOWED}", 421),
    ("localhost.evil.example.com:{port}", 421),
    ("127.0.0.1.nip.io:{port}", 421),
    # The same loopback address written otherwise is not on the list: only the names it holds pass.
    ("2130706433:{port}", 421),
    ("0x7f000001:{port}", 421),
    ("127.1:{port}", 421),
    ("[::ffff:127.0.0.1]:{port}", 421),
    ("::1", 421),
    # The bound wildcard admits no address of its own, nor does another of this machine's addresses.
    ("0.0.0.0:{port}", 421),
    ("198.51.100.7:{port}", 421),
    # Compared as written: a browser sends the name lower-cased, anything else is refused.
    ("LOCALHOST:{port}", 421),
    ("", 421),
]


@pytest.mark.parametrize(("host", "expected"), HOSTS, ids=[h or "(empty)" for h, _ in HOSTS])
def test_with_the_token_only_loopback_and_the_allowed_names_pass_the_host_check(
    port: int, host: str, expected: int
):
    headers = [("Authorization", BEARER), ("Host", host.format(port=port))]
    assert status(port, headers) == expected


def test_the_token_is_checked_before_the_host(port: int):
    assert status(port, [("Host", "evil.example.com")]) == 401


# (the Origin header, the answer): with the token and a loopback Host.
ORIGINS = [
    (None, 200),  # a request from no page at all (a script, an agent)
    ("http://127.0.0.1:{port}", 200),
    ("http://localhost:{port}", 200),
    ("http://[::1]:{port}", 200),
    (f"https://{ALLOWED}", 200),
    (f"https://{ALLOWED}:8443", 200),
    ("http://evil.example.com", 403),
    ("http://evil.example.com:{port}", 403),
    (f"https://{ALLOWED}.evil.example.com", 403),
    ("http://127.0.0.1.evil.example.com", 403),
    ("http://localhost.evil.example.com:{port}", 403),
    ("http://2130706433:{port}", 403),
    ("null", 403),  # a sandboxed iframe, a file:// page
    ("file://", 403),
    (f"ftp://{ALLOWED}", 403),
]


@pytest.mark.parametrize(("origin", "expected"), ORIGINS, ids=[o or "(none)" for o, _ in ORIGINS])
def test_with_the_token_a_page_from_anywhere_but_loopback_or_an_allowed_name_is_refused(
    port: int, origin: str | None, expected: int
):
    headers = [("Authorization", BEARER)]
    if origin is not None:
        headers.append(("Origin", origin.format(port=port)))
    assert status(port, headers) == expected


@pytest.mark.asyncio
async def test_a_client_with_the_token_works_on_the_public_server(port: int):
    async with connect(port, TOKEN) as client:
        started = await call(client, "start_run", {"task": "toy-quadratic", "budget": 2})
    assert "0/2 used" in started["summary"]
