"""What one client can do to others through the transports: never choose the run another's call means,
never grow a per-connection table without bound, never hold the server with a line or a request that
does not end. Real transports: the server over HTTP on loopback, and over stdio as a subprocess."""

import asyncio
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx2
import mcp.types as t
import pytest
import uvicorn
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from test_http import TOKEN

from autoresearch_mcp.server.http import build_http_app, uvicorn_config
from autoresearch_mcp.server.listen import MAX_STREAMS_PER_CLIENT
from autoresearch_mcp.server.notify import MAX_SUBSCRIPTIONS, MAX_URI_CHARS
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.settings import ServerSettings
from autoresearch_mcp.server.tools.connection import RunResolver
from conftest import COVTYPE_FIXTURE
from http_servers import http_server, server_env


@pytest.fixture(scope="module")
def port(tmp_path_factory: pytest.TempPathFactory, small_codeopt: Path) -> Iterator[int]:
    """One server with a token for this file's HTTP tests (a spawned server costs seconds of imports):
    each test starts runs of its own and opens its own connections, which is what the bounds are about;
    runs other tests left running keep a call that names no run as ambiguous as the test's two do."""
    tmp = tmp_path_factory.mktemp("transport-bounds")
    small = {"AUTORESEARCH_TASK_DIRS": str(small_codeopt)}
    with http_server(tmp / "runs.db", COVTYPE_FIXTURE, tmp / "data", "--token", TOKEN, **small) as port:
        yield port


@asynccontextmanager
async def legacy_client(port: int, seen: dict[str, str] | None = None) -> AsyncIterator[Client]:
    """A handshake-era client over HTTP; `seen` gets the session id the server issued it."""

    async def note(response: httpx2.Response) -> None:
        if seen is not None and response.headers.get("mcp-session-id"):
            seen["session"] = response.headers["mcp-session-id"]

    async with (
        httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {TOKEN}"},
            timeout=httpx2.Timeout(30, read=60),
            event_hooks={"response": [note]},
        ) as http,
        Client(
            streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http), mode="legacy"
        ) as client,
    ):
        yield client


async def result_of(client: Client, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    if result.is_error:
        return {"refused": (result.meta or {}).get("autoresearch/refusal", {}).get("kind")}
    return result.structured_content or {}


@pytest.mark.asyncio
async def test_a_forged_session_id_neither_reads_nor_redirects_another_clients_run(port: int):
    seen: dict[str, str] = {}
    async with legacy_client(port, seen) as victim, legacy_client(port) as other:
        mine = (await result_of(victim, "start_run", {"task": "toy-quadratic"}))["run_id"]
        await result_of(other, "start_run", {"task": "toy-quadratic"})  # two running
        # Another token holder sends the victim's session id on the 2026-07-28 protocol.
        forged = {"Authorization": f"Bearer {TOKEN}", "mcp-session-id": seen["session"]}
        async with (
            httpx2.AsyncClient(headers=forged, timeout=30) as http,
            Client(streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http)) as attacker,
        ):
            assert await result_of(attacker, "get_run_summary", {}) == {"refused": "ambiguous_run"}
            theirs = (await result_of(attacker, "start_run", {"task": "toy-quadratic"}))["run_id"]
            assert await result_of(attacker, "add_note", {"text": "mine"}) == {"refused": "ambiguous_run"}
        note = await result_of(victim, "add_note", {"text": "the victim's note", "run_id": mine})
        assert note["run_id"] == mine != theirs


async def legacy_call(
    port: int, session: str, version: str, tool: str, args: dict[str, Any]
) -> dict[str, Any]:
    """tools/call on the handshake protocol, in the handshake session `session`, as any holder of the
    token can send it: what the tool answered (`refused`: its refusal's kind)."""
    headers = {
        "Authorization": f"Bearer {TOKEN}",
        "mcp-session-id": session,
        "mcp-protocol-version": version,
        "Accept": "application/json, text/event-stream",
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": args}}
    async with httpx2.AsyncClient(timeout=30) as http:
        response = await http.post(f"http://127.0.0.1:{port}/mcp", json=body, headers=headers)
    assert response.status_code == 200, response.text
    text = response.text
    data = json.loads(text if text.lstrip().startswith("{") else text.split("data: ", 1)[1].split("\n")[0])
    result = data["result"]
    if result.get("isError"):
        return {"refused": result["_meta"]["autoresearch/refusal"]["kind"]}
    return result["structuredContent"]


@pytest.mark.asyncio
async def test_with_a_shared_token_a_stolen_handshake_session_neither_plants_notes_nor_starts_runs_for_its_owner(
    port: int,
):
    # On main the session remembered its run: whoever sent the victim's session id with the team's token
    # wrote notes into the victim's run, and a run it started there became the victim's default.
    seen: dict[str, str] = {}
    async with legacy_client(port, seen) as victim, legacy_client(port) as other:
        mine = (await result_of(victim, "start_run", {"task": "toy-quadratic"}))["run_id"]
        await result_of(other, "start_run", {"task": "toy-quadratic"})  # two running
        version = str(victim.session.protocol_version)
        stolen = await legacy_call(port, seen["session"], version, "add_note", {"text": "planted"})
        assert stolen == {"refused": "ambiguous_run"}
        theirs = await legacy_call(port, seen["session"], version, "start_run", {"task": "toy-quadratic"})
        assert (await result_of(victim, "add_note", {"text": "the victim's own"})) == {
            "refused": "ambiguous_run"
        }
        notes = (await result_of(victim, "get_run_summary", {"run_id": mine}))["summary"]
    assert "planted" not in notes and theirs["run_id"] != mine


class InitializeParams:
    """What a connection is known by (in the SDK, the initialize request's params)."""


def test_made_up_session_ids_cannot_push_a_connection_out_of_the_resolver(settings: ServerSettings):
    with Research(settings) as research:
        first, _ = research.runs.start_run("toy-quadratic", 5, None, 1, None)
        second, _ = research.runs.start_run("toy-quadratic", 5, None, 1, None)  # two running: no default
        resolver = RunResolver(research.runs)
        params = InitializeParams()
        victim = SimpleNamespace(session=SimpleNamespace(client_params=params), headers={})
        resolver.remember(victim, first.id)  # type: ignore[arg-type]
        for i in range(4200):  # calls naming a run, with made-up session ids and no session of their own
            made_up = SimpleNamespace(
                session=SimpleNamespace(client_params=None), headers={"mcp-session-id": f"x{i}"}
            )
            assert resolver(made_up, second.id).id == second.id  # type: ignore[arg-type]
        assert resolver(victim, None).id == first.id  # type: ignore[arg-type]
        assert len(resolver) == 1
        del params, victim  # the connection goes, and its entry with it
        assert len(resolver) == 0


@pytest.mark.asyncio
async def test_subscriptions_of_one_connection_are_bounded_in_number_and_length(port: int):
    async with legacy_client(port) as client:
        await subscribe(client, "test://static-text")  # any scheme: the conformance suite uses its own
        await unsubscribe(client, "test://static-text")
        for i in range(MAX_SUBSCRIPTIONS):
            await subscribe(client, f"autoresearch://runs/r-{i:010d}/summary")
        await subscribe(client, "autoresearch://runs/r-0000000000/summary")  # again: no more room taken
        with pytest.raises(MCPError, match="unsubscribe from one first"):
            await subscribe(client, "autoresearch://runs/one-too-many/summary")
        await unsubscribe(client, "autoresearch://runs/r-0000000001/summary")
        await subscribe(client, "autoresearch://runs/one-too-many/summary")
        with pytest.raises(MCPError, match=f"at most {MAX_URI_CHARS} characters"):
            await subscribe(client, "autoresearch://" + "x" * MAX_URI_CHARS)


@pytest.mark.asyncio
async def test_listen_streams_are_bounded_in_uris_their_length_and_number_per_client(port: int):
    # On main a 2026-07-28 client listened to 300 URIs of 3,031 characters, on as many streams as it liked.
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as http,
        Client(streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http)) as client,
    ):
        uris = [f"autoresearch://runs/r-{i:010d}/summary" for i in range(MAX_SUBSCRIPTIONS)]
        with pytest.raises(MCPError, match=f"at most {MAX_SUBSCRIPTIONS} resource URIs"):
            async with client.listen(resource_subscriptions=[*uris, "autoresearch://runs/one-more"]):
                pass
        with pytest.raises(MCPError, match=f"URIs of at most {MAX_URI_CHARS} characters"):
            async with client.listen(resource_subscriptions=["autoresearch://" + "x" * MAX_URI_CHARS]):
                pass
        async with AsyncExitStack() as streams:
            for _ in range(MAX_STREAMS_PER_CLIENT):
                await streams.enter_async_context(client.listen(resource_subscriptions=uris))
            with pytest.raises(MCPError, match="close one first"):
                async with client.listen(resources_list_changed=True):
                    pass
        # The others closed: room again, once the server has seen them go (a close is not awaited by
        # the server's reply to the next listen, so a loaded machine may take a moment).
        deadline = time.monotonic() + 30
        while True:
            try:
                async with client.listen(resource_subscriptions=uris) as again:
                    assert again.honored.resource_subscriptions == uris
                break
            except MCPError as refused:
                if "close one first" not in str(refused) or time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.05)


async def subscribe(client: Client, uri: str) -> None:
    """resources/subscribe without the SDK's deprecated helper (the method is handshake-era only)."""
    await client.session.send_request(
        t.SubscribeRequest(params=t.SubscribeRequestParams(uri=uri)), t.EmptyResult
    )


async def unsubscribe(client: Client, uri: str) -> None:
    await client.session.send_request(
        t.UnsubscribeRequest(params=t.UnsubscribeRequestParams(uri=uri)), t.EmptyResult
    )


def rss_peak_kb(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("VmHWM:")).split()[1])


def test_stdio_answers_a_line_that_is_no_message_and_drops_an_overlong_one_unread(tmp_path: Path):
    env = {**server_env(tmp_path / "data"), "AUTORESEARCH_LOG_LEVEL": "ERROR"}
    server = subprocess.Popen(
        [sys.executable, "-m", "autoresearch_mcp.server", "--db", str(tmp_path / "runs.db")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
    )
    answers: list[dict[str, Any]] = []
    reader = threading.Thread(
        target=lambda: answers.extend(json.loads(line) for line in server.stdout), daemon=True
    )  # type: ignore[union-attr]
    reader.start()
    assert server.stdin is not None

    def send(line: bytes, answers_expected: int) -> dict[str, Any]:
        server.stdin.write(line + b"\n")  # type: ignore[union-attr]
        server.stdin.flush()  # type: ignore[union-attr]
        deadline = time.monotonic() + 30
        while len(answers) < answers_expected:
            assert time.monotonic() < deadline, "no answer"
            time.sleep(0.01)
        return answers[-1]

    try:
        assert send(b"this is not JSON", 1) == {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": -32700, "message": "Parse error: the line is not JSON"},
        }
        assert send(b'{"id": 5, "what": "no method"}', 2)["error"]["code"] == -32600
        assert answers[-1]["id"] == 5
        before = rss_peak_kb(server.pid)
        overlong = send(b'{"jsonrpc": "2.0", "id": 6, "method": "' + b"x" * (40 << 20) + b'"}', 3)
        assert overlong["error"]["code"] == -32700 and "at most 8388608 bytes" in overlong["error"]["message"]
        assert rss_peak_kb(server.pid) - before < 30_000  # the 40 MB line was never held whole
        initialize = {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        }
        assert send(json.dumps(initialize).encode(), 4)["result"]["serverInfo"]["name"] == "autoresearch"
    finally:
        server.stdin.close()
        server.wait(timeout=30)
        reader.join(timeout=30)
        server.stdout.close()  # type: ignore[union-attr]


@contextmanager
def served_in_a_thread(settings: ServerSettings, timeout_s: float) -> Iterator[int]:
    """The HTTP app as serve_http serves it, on a loopback port, with short deadlines."""
    app = build_http_app(settings, body_timeout_s=timeout_s)
    server = uvicorn.Server(uvicorn_config(app, "127.0.0.1", 0, header_timeout_s=timeout_s))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
        time.sleep(0.02)
    try:
        yield server.servers[0].sockets[0].getsockname()[1]  # port 0: the one the system picked
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def trickle(port: int, opening: bytes, drip: bytes, for_s: float) -> bytes | None:
    """Send `opening`, then `drip` every 0.1 s; what the server answered when it closed, b"" if it was
    still waiting after `for_s`, or None if it reset the connection. A server that closes while the
    client's drips sit unread in its socket resets it, and the kernel may drop the answer it had just
    written: that is still a client let go, but not one that is sure to read the 408."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(opening)
        sock.settimeout(0.1)
        answer = b""
        end = time.monotonic() + for_s
        while time.monotonic() < end:
            try:
                chunk = sock.recv(4096)
            except TimeoutError:
                if drip:
                    try:
                        sock.sendall(drip)
                    except OSError:
                        return answer or None
                continue
            except ConnectionResetError:
                return answer or None
            if not chunk:
                return answer
            answer += chunk
        return b""


def test_http_clients_that_trickle_their_headers_or_their_body_are_answered_408_and_let_go(
    settings: ServerSettings,
):
    with served_in_a_thread(settings, timeout_s=0.5) as port:
        started = time.monotonic()
        headers = trickle(port, b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n", b"X-Slow: 1\r\n", for_s=5)
        assert headers is None or headers.startswith(b"HTTP/1.1 408")
        assert time.monotonic() - started < 2
        head = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
        started = time.monotonic()
        body = trickle(port, head + b"{", b" ", for_s=5)
        assert body is None or body.startswith(b"HTTP/1.1 408")
        assert time.monotonic() - started < 2
        # a client that stops sending (nothing left unread in the server's socket) reads why
        for opening in (b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n", head + b"{"):
            answer = trickle(port, opening, b"", for_s=5)
            assert answer is not None and answer.startswith(b"HTTP/1.1 408")
        assert b"not received within 0.5 s" in answer
        # a client that sends its request at once is served as before
        request = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}  # fmt: skip
        response = httpx2.post(
            f"http://127.0.0.1:{port}/mcp",
            json=request,
            headers={"Accept": "application/json, text/event-stream"},
            timeout=30,
        )
        assert response.status_code == 200
