"""A bounded load test of the real server: N clients read while experiments run.

One `autoresearch-mcp serve --transport http` on a free 127.0.0.1 port (or, with --transport stdio, one
stdio server process per client, all on the same database), a fresh temporary database, and the
test-only toy task (tests/toy_task.py, loaded as a task plugin). A driver client keeps an experiment in
flight the whole time (toy experiments that sleep in the sandbox); N reader clients call get_run_summary,
get_experiment_history, list_runs and the two floors below in turn, as fast as the server answers, until the
request budget is spent or the time limit passes. It binds loopback only, sends a bounded number of
requests, and stops by itself.

Two floors stand beside them. `server/discover` (what a client sends first; the 2026-07-28 protocol has
no ping) goes through the same transport and JSON-RPC dispatch and touches no tool, thread or database.
`floor` is a tool of get_run_summary's shape (a sync tool returning a run id and a summary-sized text)
with nothing behind it: what any tool call costs in the SDK. What get_run_summary costs above `floor`
is this server's own work. To have it, the server is `serve`'s own app and transport (build_http_app and
uvicorn_config, or serve_stdio) plus that one tool: benchmarks/load_server.py.
`--experiments N` starts the run with N experiments already recorded (written through the import path
before the server starts), to measure reads on a long run.

The clients are the instrument, so their own start-up stays out of the figures. Each reader makes one
untimed call of every read tool first: the SDK's client lists the tools and compiles a tool's output
schema validator at its first call of it (10-15 ms of the shared event loop each). And the clients'
process freezes its start-up objects out of its garbage collector's walk for the read phase, as the
server does while it serves (server/heap.py): a full collection of either process holds every call in
flight for tens of milliseconds.

Reports per-call latency (p50, p95, p99, max), read throughput (calls/s over the read phase) and the
error count (error results and exceptions; it should be 0). Clients run in this one Python process
(asyncio), so latencies include client-side work on the same cores as the server side.

`--trace` (HTTP) has the server time every request too (benchmarks/load_trace.py), and splits the
slowest calls into the time before the server's app saw them, inside it and after it answered, beside
both sides' event-loop stalls and garbage collections and the experiment starts that overlapped them.

    python benchmarks/load_test.py --clients 8 --calls 2000 [--experiments 100000] [--trace] --out benchmarks/load_test.md
"""

import argparse
import gc
import importlib
import os
import platform
import re
import resource
import shlex
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import anyio
import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from autoresearch_mcp.server.heap import settled

ROOT = Path(__file__).resolve().parents[1]
TOY_TASK_DIR = ROOT / "tests"  # tests/toy_task.py: a plugin task that only sleeps and scores a quadratic
READ_TOOLS = ("get_run_summary", "floor", "discover", "get_experiment_history", "list_runs")
START_TIMEOUT_S = 60.0
CALL_TIMEOUT_S = 60.0


def _load_average() -> tuple[float, float, float]:
    return os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3


@dataclass(frozen=True)
class LoadConfig:
    clients: int = 8
    calls: int = 2000  # read calls in total, over all clients
    max_seconds: float = 120.0
    experiment_sleep: float = 0.5  # seconds each driver experiment holds the sandbox
    transport: Literal["http", "stdio"] = "http"
    experiments: int = 0  # recorded before the load starts
    profile: Path | None = None  # HTTP: py-spy samples of the server, written here (server_profile.py)
    trace: bool = False  # HTTP: where each slow call's time went (load_trace.py)
    settle: bool = True  # False: the server without server/heap.py's freeze, to measure what it does


@dataclass
class LoadResult:
    config: LoadConfig
    latencies: dict[str, list[float]] = field(default_factory=lambda: {t: [] for t in READ_TOOLS})
    errors: list[str] = field(default_factory=list)
    read_seconds: float = 0.0
    experiments: int = 0
    summaries_while_running: int = 0  # get_run_summary answers that showed an experiment in flight
    cpu_s: tuple[float, ...] = ()  # CPU seconds over the read phase: the clients' process, the server's
    load_before: tuple[float, float, float] = field(default_factory=_load_average)
    calls_traced: list[Any] = field(default_factory=list)  # load_trace.ClientCall, with --trace
    server_trace: str = ""  # with --trace: the lines load_trace.slow_call_lines wrote

    @property
    def calls(self) -> int:
        return sum(len(v) for v in self.latencies.values())

    @property
    def throughput(self) -> float:
        return self.calls / self.read_seconds if self.read_seconds else 0.0


def _env(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AUTORESEARCH_")}
    env.update(
        AUTORESEARCH_TASK_PLUGINS="toy_task",
        PYTHONPATH=os.pathsep.join(p for p in (str(TOY_TASK_DIR), env.get("PYTHONPATH", "")) if p),
        AUTORESEARCH_DATA_DIR=str(data_dir),
        AUTORESEARCH_LOG_LEVEL="WARNING",
    )
    return env


def _serve_args(db: Path) -> list[str]:
    return [str(Path(__file__).resolve().parent / "load_server.py"), "--db", str(db)]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def http_server(
    db: Path,
    data_dir: Path,
    profile: Path | None = None,
    pids: list[int] | None = None,
    trace: Path | None = None,
    settle: bool = True,
) -> Iterator[str]:
    """`serve --transport http` on a free loopback port; yields the MCP URL; stopped on exit. With
    `profile`, the server is sampled (py-spy) while it serves; with `trace`, it times every request and
    writes the times there when it stops."""
    port = _free_port()
    log = db.parent / "server.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                *_serve_args(db),
                "--transport",
                "http",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                *(["--trace", str(trace)] if trace else []),
                *([] if settle else ["--no-settle"]),
            ],
            env=_env(data_dir),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + START_TIMEOUT_S
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"the server exited:\n{log.read_text()}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the server did not listen within {START_TIMEOUT_S:g} s")
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    time.sleep(0.05)
            if pids is not None:
                pids.append(proc.pid)
            if profile is None:
                yield f"http://127.0.0.1:{port}/mcp"
            else:
                with _sibling("server_profile").sampled(proc.pid, profile):
                    yield f"http://127.0.0.1:{port}/mcp"
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _sibling(name: str) -> Any:
    """A module beside this file (server_profile, load_server), imported when it is needed."""
    here = str(Path(__file__).resolve().parent)
    if here not in sys.path:
        sys.path.insert(0, here)
    return importlib.import_module(name)


@asynccontextmanager
async def connect(target: str | StdioServerParameters, name: str = "") -> AsyncIterator[Client]:
    """A client of the server; over HTTP its requests carry `name` (load_trace.py matches them by it)."""
    if isinstance(target, StdioServerParameters):
        async with Client(target) as client:
            yield client
        return
    timeout = httpx2.Timeout(CALL_TIMEOUT_S, read=CALL_TIMEOUT_S)
    async with (
        httpx2.AsyncClient(timeout=timeout, headers={"x-load-client": name}) as http,
        Client(streamable_http_client(target, http_client=http)) as client,
    ):
        yield client


async def _call(client: Client, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    with anyio.fail_after(CALL_TIMEOUT_S):
        result = await client.call_tool(tool, args)
    if result.is_error:
        raise RuntimeError(f"{tool}: {result.content[0].text}")
    return result.structured_content or {}


async def _drive(
    client: Client, run_id: str, config: LoadConfig, done: anyio.Event, result: LoadResult
) -> None:
    """Keep one experiment in flight until the readers are done."""
    x = 0
    while not done.is_set():
        x += 1
        params = {"x": round(-10 + (x * 0.001) % 20, 6), "sleep": config.experiment_sleep}
        try:
            await _call(client, "run_experiment", {"params": params, "run_id": run_id})
            if not done.is_set():  # count only those that ended while the readers were reading
                result.experiments += 1
        except Exception as exc:  # counted, and the load goes on
            result.errors.append(f"driver run_experiment: {exc!r}"[:300])


async def _ask(client: Client, tool: str, run_id: str) -> dict[str, Any]:
    """One read call; `discover` is sent every time (the client would otherwise answer from its cache)."""
    if tool == "discover":
        with anyio.fail_after(CALL_TIMEOUT_S):
            await client.session.send_discover(client.protocol_version)
        return {}
    args: dict[str, Any] = {} if tool == "list_runs" else {"run_id": run_id}
    if tool == "get_experiment_history":
        args["last"] = 20
    return await _call(client, tool, args)


async def _warm(client: Client, run_id: str) -> None:
    """One untimed call of each read tool. The SDK's client lists the tools and compiles a tool's output
    schema validator at its first call of it, 10-15 ms of its event loop each time; with 8 clients that
    is half a second in which every reader waits, the instrument's start-up rather than the server's."""
    for tool in READ_TOOLS:
        await _ask(client, tool, run_id)


async def _read(
    client: Client, name: str, run_id: str, calls: int, deadline: float, result: LoadResult
) -> None:
    for i in range(calls):
        if time.monotonic() > deadline:
            return
        tool = READ_TOOLS[i % len(READ_TOOLS)]
        started, since = time.perf_counter(), time.monotonic()
        try:
            body = await _ask(client, tool, run_id)
        except Exception as exc:
            result.errors.append(f"{tool}: {exc!r}"[:300])
            continue
        result.latencies[tool].append(time.perf_counter() - started)
        _traced(result, name, tool, since)
        if tool == "get_run_summary" and _experiment_running(body["summary"]):
            result.summaries_while_running += 1


def _traced(result: LoadResult, name: str, tool: str, since: float) -> None:
    if result.config.trace:
        result.calls_traced.append(_sibling("load_trace").ClientCall(name, tool, since, time.monotonic()))


def _experiment_running(summary: str) -> bool:
    """The summary's Counts line reads e.g. `Counts: ok 3, running 1`."""
    return re.search(r"^Counts: .*\brunning \d", summary, re.MULTILINE) is not None


async def run_load(config: LoadConfig, workdir: Path | None = None) -> LoadResult:
    """Start the server(s) in a temporary directory, run the load, stop everything, return the figures."""
    result = LoadResult(config)
    with tempfile.TemporaryDirectory(prefix="autoresearch-load-", dir=workdir) as tmp:
        db, data_dir = Path(tmp) / "runs.db", Path(tmp) / "data"
        if config.experiments:
            _sibling("load_server").prefill(db, config.experiments)
        pids: list[int] = []
        trace = Path(tmp) / "trace.json" if config.trace else None
        client_gc = _sibling("load_trace").Collections() if trace else None
        client_loop = _sibling("load_trace").LoopStalls() if trace else None
        with servers(config, db, data_dir, pids, trace) as target:
            async with AsyncExitStack() as stack:
                clients = [
                    await stack.enter_async_context(connect(target(i), str(i)))
                    for i in range(config.clients + 1)
                ]
                driver, readers = clients[0], clients[1:]
                if config.experiments:
                    run_id = _sibling("load_server").PREFILLED
                else:
                    started = await _call(driver, "start_run", {"task": "toy-quadratic", "budget": 10_000})
                    run_id = started["run_id"]
                done = anyio.Event()
                async with anyio.create_task_group() as tg:
                    tg.start_soon(_drive, driver, run_id, config, done, result)
                    with anyio.fail_after(START_TIMEOUT_S):  # read once the first experiment is in flight
                        while not _experiment_running(
                            (await _call(readers[0], "get_run_summary", {"run_id": run_id}))["summary"]
                        ):
                            await anyio.sleep(0.02)
                    for reader in readers:
                        await _warm(reader, run_id)
                    begin = time.monotonic()
                    cpu = _cpu_seconds(pids)
                    deadline = begin + config.max_seconds
                    per_client = [config.calls // config.clients] * config.clients
                    for i in range(config.calls % config.clients):
                        per_client[i] += 1
                    # The clients are the instrument: their own start-up objects stay out of their
                    # collector's walk, as the server's do (server/heap.py), or a 45 ms collection of
                    # theirs lands in the server's figures.
                    with settled():
                        if client_gc is not None:  # the read phase's collections, not settled()'s own
                            client_gc.install()
                        async with anyio.create_task_group() as watch:
                            if client_loop is not None:
                                watch.start_soon(client_loop.watch)
                            async with anyio.create_task_group() as reads:
                                for i, (client, calls) in enumerate(zip(readers, per_client, strict=True), 1):
                                    reads.start_soon(_read, client, str(i), run_id, calls, deadline, result)
                            watch.cancel_scope.cancel()
                    result.read_seconds = time.monotonic() - begin
                    result.cpu_s = tuple(
                        after - before for after, before in zip(_cpu_seconds(pids), cpu, strict=True)
                    )
                    done.set()
        if trace is not None and client_gc is not None and client_loop is not None:  # written at stop
            gc.callbacks.remove(client_gc)
            lines = _sibling("load_trace").slow_call_lines(trace, result.calls_traced, client_gc, client_loop)
            result.server_trace = "\n".join(lines)
    return result


@contextmanager
def servers(
    config: LoadConfig, db: Path, data_dir: Path, pids: list[int], trace: Path | None = None
) -> Iterator[Any]:
    """Yields target(i): what client i connects to (the one HTTP URL, or its own stdio server); `pids`
    gets the HTTP server's process id."""
    if config.transport == "http":
        with http_server(db, data_dir, config.profile, pids, trace, config.settle) as url:
            yield lambda i: url
        return
    params = StdioServerParameters(command=sys.executable, args=_serve_args(db), env=_env(data_dir))
    yield lambda i: params


def _cpu_seconds(pids: list[int]) -> tuple[float, ...]:
    """CPU seconds so far of this process (the clients, the driver among them) and of each server."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    mine = usage.ru_utime + usage.ru_stime
    ticks = os.sysconf("SC_CLK_TCK")
    theirs = []
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        theirs.append((int(fields[11]) + int(fields[12])) / ticks)  # utime, stime
    return (mine, *theirs)


def _ms(values: list[float], q: float) -> str:
    if not values:
        return "-"
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))
    return f"{ordered[index] * 1000:.1f}"


def report(result: LoadResult, command: str) -> str:
    c = result.config
    before, after = result.load_before, _load_average()
    lines = [
        f"# Load test ({c.transport}): concurrent readers while experiments run",
        "",
        f"Command: `{command}`",
        "",
        f"Machine: {platform.platform()}, {os.cpu_count()} logical CPUs, Python {platform.python_version()}; "
        f"1-minute load average {before[0]:.2f} before the run, {after[0]:.2f} after.",
        "",
        "Setup: "
        + (
            "streamable HTTP, one server on 127.0.0.1"
            if c.transport == "http"
            else f"stdio, one server process per client ({c.clients + 1}) on one SQLite file"
        )
        + f"; {c.clients} reader clients, {c.calls} read calls in total (bounded by {c.max_seconds:g} s); "
        "one driver client running toy-quadratic experiments that each sleep "
        f"{c.experiment_sleep:g} s in the sandbox, back to back, so an experiment is in flight throughout"
        + (
            f", on a run that had {c.experiments:,} experiments recorded before the load began"
            if c.experiments
            else ", on a fresh run"
        )
        + ". The clients share one Python process (asyncio) with each other, on the same cores as the "
        "server side. The floors: `discover` (server/discover: the transport and the JSON-RPC dispatch, "
        "no tool, no database) and `floor` (a tool of get_run_summary's shape with nothing behind it: "
        "what any tool call costs in the SDK).",
        "",
        "| call | calls | p50 (ms) | p95 (ms) | p99 (ms) | max (ms) | mean (ms) |",
        "|---|---|---|---|---|---|---|",
    ]
    for tool, values in result.latencies.items():
        mean = f"{statistics.fmean(values) * 1000:.1f}" if values else "-"
        lines.append(
            f"| `{tool}` | {len(values)} | {_ms(values, 0.5)} | {_ms(values, 0.95)} | {_ms(values, 0.99)} "
            f"| {_ms(values, 1.0)} | {mean} |"
        )
    lines += [
        "",
        f"Read throughput: **{result.throughput:.1f} calls/s** "
        f"({result.calls} calls in {result.read_seconds:.2f} s). "
        f"Experiments completed meanwhile: {result.experiments}; "
        f"{result.summaries_while_running} of {len(result.latencies['get_run_summary'])} summaries showed one "
        f"running. Errors: **{len(result.errors)}**.",
    ]
    if len(result.cpu_s) == 2 and result.calls:
        clients, server = (1000 * seconds / result.calls for seconds in result.cpu_s)
        lines += [
            "",
            f"CPU per read call over the read phase: the server {server:.1f} ms, the clients' process "
            f"{clients:.1f} ms (both on the same {os.cpu_count()} cores, with whatever else runs there).",
        ]
    if result.errors:
        lines += ["", "First errors:", "", *[f"- `{e}`" for e in result.errors[:10]]]
    if result.server_trace:
        lines += result.server_trace.split("\n")
    if c.profile is not None:
        lines += _sibling("server_profile").report_lines(
            c.profile, ("get_run_summary", "floor", *READ_TOOLS[3:])
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=8, help="reader clients (default 8)")
    parser.add_argument("--calls", type=int, default=2000, help="read calls in total (default 2000)")
    parser.add_argument("--max-seconds", type=float, default=120.0, help="stop reading after this long")
    parser.add_argument("--experiment-sleep", type=float, default=0.5, help="seconds per driver experiment")
    parser.add_argument("--transport", choices=["http", "stdio"], default="http")
    parser.add_argument("--experiments", type=int, default=0, help="experiments recorded before the load")
    parser.add_argument("--profile", type=Path, help="HTTP: sample the server with py-spy, raw stacks here")
    parser.add_argument(
        "--trace", action="store_true", help="HTTP: time each request in the server too; split the slow calls"
    )
    parser.add_argument(
        "--no-settle", action="store_true", help="serve without server/heap.py's freeze (before and after)"
    )
    parser.add_argument("--out", type=Path, help="also write the Markdown report here")
    args = parser.parse_args(argv)
    if args.trace and args.transport != "http":
        parser.error("--trace times requests in the HTTP server: use it with --transport http")
    if not 1 <= args.clients <= 64 or not 1 <= args.calls <= 100_000 or not 0 < args.max_seconds <= 3600:
        parser.error("bounds: 1..64 clients, 1..100000 calls, 0..3600 s")
    config = LoadConfig(
        args.clients,
        args.calls,
        args.max_seconds,
        args.experiment_sleep,
        args.transport,
        args.experiments,
        args.profile.resolve() if args.profile else None,
        args.trace,
        not args.no_settle,
    )
    result = anyio.run(run_load, config)
    command = "python benchmarks/load_test.py " + shlex.join(argv)
    text = report(result, command.strip())
    print(text)
    if args.out:
        args.out.write_text(text)
    return 1 if result.errors else 0


if __name__ == "__main__":
    sys.exit(main())
