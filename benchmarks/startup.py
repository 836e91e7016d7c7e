"""How long a spawned server takes to be ready, and what the CLI's --help costs: medians over repeats.

Spawn-to-initialize is what a host (Claude Desktop, `autoresearch-mcp run`) waits for before the first
tool call: the time from starting `python -m autoresearch_mcp.server` over stdio until the MCP
handshake has answered, and until `tools/list` has answered. Each repeat uses a fresh temporary
database, so nothing is cached between repeats but the operating system's file cache.

    python benchmarks/startup.py --repeats 7
    python benchmarks/startup.py --repeats 7 --python /path/to/other/venv/bin/python   # side by side

With several --python, the interpreters are measured in turn, round-robin, so that load on the machine
falls on each alike.
"""

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters


async def spawn_to_ready(python: str) -> tuple[float, float]:
    """Seconds to the end of the handshake, and to the answer of tools/list."""
    with tempfile.TemporaryDirectory() as tmp:
        params = StdioServerParameters(
            command=python,
            args=["-m", "autoresearch_mcp.server", "--db", str(Path(tmp) / "runs.db")],
            env={"AUTORESEARCH_LOG_LEVEL": "WARNING", "AUTORESEARCH_DATA_DIR": tmp},
        )
        started = time.perf_counter()
        async with Client(params) as client:
            ready = time.perf_counter() - started
            await client.list_tools()
            listed = time.perf_counter() - started
    return ready, listed


def help_seconds(python: str) -> float:
    started = time.perf_counter()
    subprocess.run([python, "-m", "autoresearch_mcp.cli", "--help"], check=True, capture_output=True)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument(
        "--python", action="append", help="interpreter(s) to measure (default: this one); repeatable"
    )
    args = parser.parse_args()
    pythons = args.python or [sys.executable]
    figures: dict[str, dict[str, list[float]]] = {p: {"ready": [], "listed": [], "help": []} for p in pythons}
    for _ in range(args.repeats):
        for python in pythons:
            ready, listed = anyio.run(spawn_to_ready, python)
            figures[python]["ready"].append(ready)
            figures[python]["listed"].append(listed)
            figures[python]["help"].append(help_seconds(python))
    print("| python | spawn to initialize (s) | to tools/list (s) | `--help` (s) |")
    print("|---|---|---|---|")
    for python, values in figures.items():
        cells = [f"{statistics.median(v):.2f} [{min(v):.2f}-{max(v):.2f}]" for v in values.values()]
        print(f"| {python} | " + " | ".join(cells) + " |")
    print(f"\nmedian [min-max] over {args.repeats} repeats each")
    return 0


if __name__ == "__main__":
    sys.exit(main())
