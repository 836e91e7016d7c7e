"""Class 7 of issue 13: every HTTP route caps the request body before reading it, with or without a token.
A real server on loopback gets a huge body (announced, and streamed without a length); it answers 413
without the body ever being held in memory."""

import select
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from test_http import TOKEN

from http_servers import serving_process

BODY_MB = 192


@contextmanager
def served(tmp_path: Path, csv: Path, *args: str) -> Iterator[tuple[int, int]]:
    with serving_process(tmp_path / "runs.db", csv, tmp_path / "data", *args) as (port, proc):
        yield port, proc.pid


def memory_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(field)


def send_huge(port: int, path: str, *, announce: bool, headers: str = "") -> int:
    """POST a BODY_MB body (with a Content-Length, or chunked) and return the status the server answers."""
    chunk = b"token=" + b"x" * (1024 * 1024 - 6)
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        framing = f"Content-Length: {BODY_MB * len(chunk)}" if announce else "Transfer-Encoding: chunked"
        sock.sendall(
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{headers}"
            f"Content-Type: application/x-www-form-urlencoded\r\n{framing}\r\n\r\n".encode()
        )
        # Blocking sends with a timeout, checking for an answer before each chunk: a server that stops
        # reading (it has answered, or is about to) ends the sending, never the test.
        sock.settimeout(10)
        for _ in range(BODY_MB):
            if select.select([sock], [], [], 0)[0]:
                break
            data = chunk if announce else b"%x\r\n" % len(chunk) + chunk + b"\r\n"
            try:
                sock.sendall(data)
            except (TimeoutError, BrokenPipeError, ConnectionResetError):
                break
        sock.settimeout(60)
        reply = b""
        try:
            while b"\r\n" not in reply:
                more = sock.recv(65536)
                if not more:
                    break
                reply += more
        except (ConnectionResetError, TimeoutError):
            pass
    assert reply.startswith(b"HTTP/1.1 "), reply[:200]
    return int(reply.split()[1])


MCP_HEADERS = "Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n"
BEARER = f"Authorization: Bearer {TOKEN}\r\n"


@pytest.mark.parametrize("token", [True, False], ids=["with-token", "without-token"])
def test_a_huge_body_gets_a_413_on_every_route_without_being_held_in_memory(tmp_path, covtype_csv, token):
    # Without a token the login route redirects without reading the body at all (303); everything
    # else that would read it gets the 413 first.
    login_chunked = 413 if token else 303
    requests = [
        ("/dashboard/login", True, ""),
        ("/dashboard/login", False, ""),
        ("/dashboard/api/runs", True, BEARER if token else ""),
        ("/mcp", True, MCP_HEADERS + (BEARER if token else "")),
        ("/mcp", False, MCP_HEADERS + (BEARER if token else "")),
    ]
    args = ("--token", TOKEN) if token else ()
    with served(tmp_path, covtype_csv, *args) as (port, pid):
        before = memory_kb(pid, "VmRSS")
        statuses = [send_huge(port, path, announce=announce, headers=h) for path, announce, h in requests]
        peak = memory_kb(pid, "VmHWM")
    assert statuses == [413, login_chunked, 413, 413, 413]
    assert (peak - before) < 40 * 1024, f"the server grew by {(peak - before) // 1024} MB"
