"""Where a slow call's time went, for benchmarks/load_test.py --trace (HTTP only).

The server side (load_server.py --trace FILE) records, for every POST to /mcp, which reader sent it (the
`x-load-client` header), what it asked (the JSON-RPC method, and the tool's name), when the app first saw
it and when the last byte of its answer left; beside that, every stall of its event loop (a 1 ms sleep
that woke late) and every garbage collection. The client side records the same calls from its end and
its own collections. Both read `time.monotonic()`, one clock for every process on a Linux host, so a
client call and the server's request for it line up: the slow calls split into the time before the
server's app saw the request, inside it, and after it answered, each beside what else happened then.
"""

import gc
import json
import statistics
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

CLIENT_HEADER = b"x-load-client"
LOOP_TICK_S = 0.001
STALL_S = 0.005  # a 1 ms sleep that wakes more than this late: the loop was held
BODY_PEEK = 4096  # enough of a request body to read its method and tool name

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


@dataclass
class Collections:
    """Garbage collections in this process that took at least 1 ms: (generation, start, seconds)."""

    pauses: list[tuple[int, float, float]] = field(default_factory=list)
    count: int = 0
    _started: float = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.monotonic()
            return
        self.count += 1
        took = time.monotonic() - self._started
        if took >= 0.001:
            self.pauses.append((info["generation"], self._started, took))

    def install(self) -> "Collections":
        gc.callbacks.append(self)
        return self


@dataclass
class LoopStalls:
    """Stretches in which this process's event loop could not run anything else: a 1 ms sleep that woke
    more than 5 ms late, as (when it should have ended, how late it woke, the loop thread's CPU seconds
    meanwhile). The CPU time tells the loop running code (held) from the process not being given a core
    or the GIL (waiting)."""

    stalls: list[tuple[float, float, float]] = field(default_factory=list)

    async def watch(self) -> None:
        while True:
            due, cpu = time.monotonic() + LOOP_TICK_S, time.thread_time()
            await anyio.sleep(LOOP_TICK_S)
            late = time.monotonic() - due
            if late > STALL_S:
                self.stalls.append((due, late, time.thread_time() - cpu))


@dataclass
class ServerTrace:
    requests: list[dict[str, Any]] = field(default_factory=list)
    loop: LoopStalls = field(default_factory=LoopStalls)
    collections: Collections = field(default_factory=Collections)

    def write(self, path: Path) -> None:
        path.write_text(
            json.dumps(
                {
                    "requests": self.requests,
                    "stalls": self.loop.stalls,
                    "gc": self.collections.pauses,
                    "gc_count": self.collections.count,
                }
            )
        )


def _what(body: bytes) -> str:
    """`tools/call get_run_summary`, `server/discover`, ... (or `?` for what does not parse)."""
    try:
        message = json.loads(body)
    except ValueError:
        return "?"
    if not isinstance(message, dict):
        return "?"
    method = str(message.get("method", "?"))
    params = message.get("params")
    if method == "tools/call" and isinstance(params, dict):
        return f"{method} {params.get('name')}"
    return method


class TraceRequests:
    """ASGI middleware: the time from the app's first sight of a POST to the last byte of its answer."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]], trace: ServerTrace) -> None:
        self.app = app
        self.trace = trace

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        start = time.monotonic()
        client = dict(scope["headers"]).get(CLIENT_HEADER, b"").decode()
        body = bytearray()
        answered: list[float] = []

        async def peek() -> Message:
            message = await receive()
            if message["type"] == "http.request" and len(body) < BODY_PEEK:
                body.extend(message.get("body", b"")[: BODY_PEEK - len(body)])
            return message

        async def timed(message: Message) -> None:
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                answered.append(time.monotonic())

        try:
            await self.app(scope, peek, timed)
        finally:
            end = answered[0] if answered else time.monotonic()
            self.trace.requests.append(
                {"client": client, "what": _what(bytes(body)), "start": start, "end": end}
            )


@dataclass(frozen=True)
class ClientCall:
    client: str
    tool: str
    start: float
    end: float


def _server_name(tool: str) -> str:
    return "server/discover" if tool == "discover" else f"tools/call {tool}"


def _overlaps(start: float, end: float, events: list[tuple[float, float]]) -> float:
    """Seconds of [start, end] covered by the (begin, length) events."""
    return sum(max(0.0, min(end, b + n) - max(start, b)) for b, n in events)


def slow_call_lines(
    trace_path: Path, calls: list[ClientCall], client_gc: Collections, client_loop: LoopStalls
) -> list[str]:
    """The report's section: the slowest 1% of each tool's calls (at least 4), split by where the time
    went, beside both sides' loop stalls and collections and the experiment starts and ends that
    overlapped them; the same split for the median call, to compare with."""
    trace = json.loads(trace_path.read_text())
    by_client: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for request in trace["requests"]:
        by_client.setdefault((request["client"], request["what"]), []).append(request)
    stalls = [(due, late) for due, late, _ in trace["stalls"]]
    server_gc = [(start, took) for _, start, took in trace["gc"]]
    mine_gc = [(start, took) for _, start, took in client_gc.pauses]
    mine_stalls = [(due, late) for due, late, _ in client_loop.stalls]
    experiments = [
        (r["start"], r["end"] - r["start"])
        for r in trace["requests"]
        if r["what"] == "tools/call run_experiment"
    ]
    edges = [(t, 0.0) for s, n in experiments for t in (s, s + n)]  # a run_experiment call starts or ends

    def matched(call: ClientCall) -> dict[str, Any] | None:
        for request in by_client.get((call.client, _server_name(call.tool)), []):
            # by its start: the client may read the last byte before the server's send() returns
            if call.start <= request["start"] <= call.end:
                return request
        return None

    def split(group: list[ClientCall]) -> tuple[str, int]:
        parts: list[tuple[float, float, float]] = []
        for call in group:
            request = matched(call)
            if request is not None:
                parts.append(
                    (
                        request["start"] - call.start,
                        request["end"] - request["start"],
                        call.end - request["end"],
                    )
                )
        if not parts:
            return "| - | - | - |", 0
        before, inside, after = (statistics.median(p[i] for p in parts) * 1000 for i in range(3))
        return f"| {before:.1f} | {inside:.1f} | {after:.1f} |", len(parts)

    lines = [
        "",
        "Where the slow calls' time went (`--trace`: the server timed every request from its app's first "
        "sight of it to the last byte of its answer, on the clock the clients read; medians, in ms):",
        "",
        "| call | which | calls | matched | before the server's app | inside it | after it answered | "
        "server loop stalled (ms, sum) | server GC (ms, sum) | clients' loop stalled (ms, sum) | "
        "clients' GC (ms, sum) | experiment starts/ends within |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for tool in sorted({c.tool for c in calls}, key=[c.tool for c in calls].index):
        mine = sorted((c for c in calls if c.tool == tool), key=lambda c: c.end - c.start)
        n_slow = max(4, len(mine) // 100)
        middle = len(mine) // 2
        for which, group in (("median", mine[middle : middle + 1]), (f"slowest {n_slow}", mine[-n_slow:])):
            cells, found = split(group)
            stalled = sum(_overlaps(c.start, c.end, stalls) for c in group) * 1000
            s_gc = sum(_overlaps(c.start, c.end, server_gc) for c in group) * 1000
            c_stalled = sum(_overlaps(c.start, c.end, mine_stalls) for c in group) * 1000
            c_gc = sum(_overlaps(c.start, c.end, mine_gc) for c in group) * 1000
            edges_in = sum(1 for c in group for t, _ in edges if c.start <= t <= c.end)
            lines.append(
                f"| `{tool}` | {which} | {len(group)} | {found} {cells} {stalled:.1f} | {s_gc:.1f} | "
                f"{c_stalled:.1f} | {c_gc:.1f} | {edges_in} |"
            )
    lines += [
        "",
        f"Over the whole run: the server's event loop {_stalled(trace['stalls'])}; the server collected "
        f"garbage {trace['gc_count']} times, {len(server_gc)} of them for 1 ms or more (the longest "
        f"{max((t for _, t in server_gc), default=0.0) * 1000:.1f} ms). The clients' event loop "
        f"{_stalled(client_loop.stalls)}; their process collected garbage {client_gc.count} times, "
        f"{len(mine_gc)} of them for 1 ms or more (the longest "
        f"{max((t for _, t in mine_gc), default=0.0) * 1000:.1f} ms).",
    ]
    return lines


def _stalled(stalls: list[tuple[float, float, float]] | list[list[float]]) -> str:
    """`stalled 37 times for more than 5 ms (the longest ...; ... in all, of which ...)`."""
    lates = [late for _, late, _ in stalls]
    busy = sum(min(cpu, late) for _, late, cpu in stalls)
    return (
        f"stalled {len(lates)} times for more than {STALL_S * 1000:g} ms (the longest "
        f"{max(lates, default=0.0) * 1000:.1f} ms; {sum(lates) * 1000:.0f} ms in all, of which its thread "
        f"ran code for {busy * 1000:.0f} ms and waited for a core or the GIL the rest)"
    )
