"""Where a server process spends its CPU, by layer: py-spy samples of the thread holding the GIL (so
waiting is not counted), each charged to the package of the frame it was in.

A sample in SQLite's C code is charged to the Python line that called it, which is ours: "this server"
includes its queries. Used by load_test.py --profile; needs `py-spy` on PATH (pip install py-spy).
"""

import re
import shutil
import signal
import subprocess
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LAYERS: dict[str, tuple[str, ...]] = {
    "this server (autoresearch_mcp, with its SQLite calls)": ("server/", "client/", "autoresearch_mcp/"),
    "the experiments in flight (sandbox: process, pipes)": ("sandbox/",),
    "the load test's `floor` tool": ("load_test.py",),
    "MCP SDK (mcp, mcp_types)": ("mcp/", "mcp_types/"),
    "pydantic": ("pydantic/", "pydantic_core/"),
    "HTTP (uvicorn, h11, starlette, sse_starlette)": ("uvicorn/", "h11/", "starlette/", "sse_starlette/"),
    "event loop and threads (asyncio, anyio, threading, queue)": (
        "asyncio/", "anyio/", "threading.py", "queue.py", "selectors.py", "concurrent/", "contextvars",
    ),
    "tracing (opentelemetry)": ("opentelemetry/",),
    "json, logging": ("json/", "logging/"),
}  # fmt: skip


@contextmanager
def sampled(pid: int, out: Path, rate: int = 250) -> Iterator[bool]:
    """Sample `pid` while the block runs; yields whether a sampler runs (py-spy found)."""
    spy = shutil.which("py-spy")
    if spy is None:
        yield False
        return
    options = ["--rate", str(rate), "--gil", "--nonblocking", "--format", "raw", "--output", str(out)]
    proc = subprocess.Popen(
        [spy, "record", "--pid", str(pid), *options],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield True
    finally:
        proc.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
        proc.wait(timeout=60)


def _layer(frame: str) -> str:
    match = re.search(r"\(([^()]*):\d+\)$", frame)
    path = match.group(1) if match else frame
    for layer, prefixes in LAYERS.items():
        if any(path.startswith(p) or f"/{p}" in path for p in prefixes):
            return layer
    return "other (interpreter, standard library)"


def by_layer(raw: Path) -> tuple[int, list[tuple[str, float]]]:
    """(samples, [(layer, share of samples whose innermost frame is in it)]), largest first."""
    counts: Counter[str] = Counter()
    for line in raw.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if stack:
            counts[_layer(stack.split(";")[-1])] += int(n)
    total = sum(counts.values())
    return total, [(layer, n / total) for layer, n in counts.most_common()] if total else []


def inside(raw: Path, functions: tuple[str, ...]) -> dict[str, float]:
    """Share of samples with each function anywhere on the stack (its own work and what it called)."""
    counts: Counter[str] = Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        total += int(n)
        frames = {frame.split(" (")[0].rpartition(".")[2] for frame in stack.split(";")}
        counts.update({name: int(n) for name in functions if name in frames})
    return {name: counts[name] / total for name in functions} if total else {}


def report_lines(raw: Path, tools: tuple[str, ...] = ()) -> list[str]:
    if not raw.is_file():
        return ["", "No profile: py-spy was not found (pip install py-spy)."]
    total, shares = by_layer(raw)
    lines = [
        "",
        f"Where the server's CPU went during the load ({total:,} py-spy samples of the thread holding the "
        "GIL; each charged to the layer of its innermost Python frame):",
        "",
        "| layer | share of CPU samples |",
        "|---|---|",
    ]
    lines += [f"| {layer} | {share:.0%} |" for layer, share in shares]
    if tools:
        shares_in = inside(raw, tools)
        lines += [
            "",
            "Inside each tool's own function (with what it called: the run lookup, the store, the render): "
            + ", ".join(f"`{name}` {share:.1%}" for name, share in shares_in.items())
            + " of the samples. The rest of a call is the SDK's: transport, dispatch, validation, threads.",
        ]
    return lines
