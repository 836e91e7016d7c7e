"""How far can codeopt-records go, and what does the sandbox cost? Prints a Markdown report.

1. Every step of the rewrite catalogue, timed in this process exactly as the harness times it (a fresh
   input per call, gc off during the call, median after one warm-up): the last step is the fastest
   pure-Python version we have, i.e. the practical ceiling of the speedup metric.
2. The benchmark harness run in the sandbox against the same harness called in this process (wall time
   and the candidate time each measures), and whole run_benchmark calls with the server's check.

Usage: python benchmarks/codeopt_limits.py [--records 10000] [--repeats 20] [--rounds 5] > benchmarks/codeopt_limits.md
"""

import argparse
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from typing import Any

from autoresearch_mcp.sandbox import sealed
from autoresearch_mcp.sandbox.runner import Limits, run_sandboxed
from autoresearch_mcp.server.tasks.base import ExecContext, NoParams
from autoresearch_mcp.server.tasks.codeopt_records import child as codeopt_child
from autoresearch_mcp.server.tasks.codeopt_records.records import (
    make_records,
)
from autoresearch_mcp.server.tasks.codeopt_records.rewrites import REWRITES, source_after
from autoresearch_mcp.server.tasks.codeopt_records.task import ENTRY, CodeOptTask


def load(source: str) -> Any:
    namespace: dict[str, Any] = {}
    exec(compile(source, "train.py", "exec"), namespace)
    return namespace["process_records"]


def catalogue(n: int, repeats: int) -> list[str]:
    """Every step timed on the same fresh inputs, round-robin (the order rotating each round), so that
    drifting background load falls on all steps alike."""
    functions = [load(source_after(step)) for step in range(len(REWRITES) + 1)]
    times: list[list[float]] = [[] for _ in functions]
    for round_ in range(repeats + 1):
        records = make_records(n, 1000 + round_)
        for offset in range(len(functions)):
            index = (round_ + offset) % len(functions)
            gc.collect()
            gc.disable()  # as the harness does
            try:
                start = time.perf_counter()
                functions[index](records)
                elapsed = time.perf_counter() - start
            finally:
                gc.enable()
            if round_:  # the first round warms up
                times[index].append(elapsed * 1000)
    medians = [statistics.median(t) for t in times]
    lines = [
        f"## 1. The rewrite catalogue, in process ({n} records, median of {repeats} fresh inputs)",
        "",
        "| step | rewrite | time (ms) | speedup |",
        "|---:|---|---:|---:|",
        f"| 0 | the reference (train.py v1) | {medians[0]:.2f} | 1.00x |",
    ]
    for step, rewrite in enumerate(REWRITES, start=1):
        lines.append(
            f"| {step} | {rewrite.description} | {medians[step]:.2f} | {medians[0] / medians[step]:.2f}x |"
        )
    return lines


# The same harness in a plain child process: no namespaces, Landlock or limits, so that the difference
# to the sandbox is the isolation alone (a fresh process also has a smaller heap than this one).
_PLAIN = (
    "import json, statistics, sys\n"
    "from autoresearch_mcp.sandbox import sealed\n"
    "from autoresearch_mcp.server.tasks.codeopt_records.child import run_benchmark\n"
    "payload = json.load(sys.stdin)\n"
    "sealed.open_feed(sealed.pipe_with(payload.pop('seeds')))\n"
    "print(json.dumps(statistics.median(run_benchmark(payload)['times_ms'][1:])))\n"
)


def _timed(kind: str, payload: dict[str, Any], seeds: list[int], limits: Limits) -> tuple[float, float]:
    start = time.perf_counter()
    if kind == "sandboxed":
        result = run_sandboxed(ENTRY, payload, limits, sealed=seeds)
        assert result.status == "ok" and result.result is not None, result.output_tail
        measured = statistics.median(result.result["times_ms"][1:])
    elif kind == "plain child":
        done = subprocess.run(
            [sys.executable, "-I", "-c", _PLAIN],
            input=json.dumps({**payload, "seeds": seeds}),
            capture_output=True,
            text=True,
        )
        measured = float(done.stdout)
    else:
        sealed.open_feed(sealed.pipe_with(seeds))
        measured = statistics.median(codeopt_child.run_benchmark(payload)["times_ms"][1:])
    return (time.perf_counter() - start) * 1000, measured


def overhead(n: int, repeats: int, rounds: int) -> list[str]:
    """The harness in the sandbox, in a plain child process and in this process, interleaved so that the
    machine's background load falls on all alike; then whole benchmark calls (with the server's check)."""
    limits = Limits.model_validate(CodeOptTask({}).options()["limits"])
    kinds = ("sandboxed", "plain child", "in process")
    rows = []
    for label, source in (("reference", source_after(0)), ("fastest rewrite", source_after(len(REWRITES)))):
        walls: dict[str, list[float]] = {kind: [] for kind in kinds}
        measured: dict[str, list[float]] = {kind: [] for kind in kinds}
        for round_ in range(rounds):
            seeds = list(range(7000 + 100 * round_, 7000 + 100 * round_ + repeats + 1))
            for kind in kinds:
                payload = {"source": source, "n_records": n, "calls": len(seeds)}
                wall, ms = _timed(kind, payload, seeds, limits)
                walls[kind].append(wall)
                measured[kind].append(ms)
        wall = {kind: statistics.median(walls[kind]) for kind in kinds}
        rows.append(
            f"| {label} | {wall['sandboxed']:.0f} | {wall['plain child']:.0f} | {wall['in process']:.0f} | "
            f"{wall['sandboxed'] - wall['plain child']:+.0f} | {wall['sandboxed'] - wall['in process']:+.0f} | "
            + " | ".join(f"{statistics.median(measured[kind]):.2f}" for kind in kinds)
            + " |"
        )
    task = CodeOptTask({"codeopt_records": n, "codeopt_repeats": repeats})
    options = task.options()
    calls = []
    for iteration in range(1, rounds + 1):
        start = time.perf_counter()
        outcome = task.execute(
            NoParams(),
            source_after(0),
            ExecContext(run_id="r-b", seed=1, iteration=iteration, options=options),
        )
        calls.append((time.perf_counter() - start) * 1000)
        assert outcome.status == "ok", outcome.error_tail
        if iteration == 1:
            first_call = calls.pop()
            options.update(outcome.state_update)
    starts = []
    for _ in range(10):
        start = time.perf_counter()
        run_sandboxed("autoresearch_mcp.sandbox.script:run_script", {"source": "x = 1"}, Limits())
        starts.append((time.perf_counter() - start) * 1000)
    return [
        f"## 2. The benchmark harness: sandboxed vs plain child vs in process (medians of {rounds} "
        "interleaved rounds)",
        "",
        f"One harness run = {repeats + 1} calls of the candidate, each on a fresh {n}-record input "
        "(generated untimed, in a fresh fork of the harness per call), outputs copied out. Wall times in "
        "ms; time_ms is what the harness measured (median call: from the fork's ready stamp to the "
        "kernel's send stamp of the copied output).",
        "",
        "| candidate | sandboxed | plain child | in process | sandbox - plain child | sandbox - in process | "
        "time_ms sandboxed | time_ms plain child | time_ms in process |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        *rows,
        "",
        f"Starting and ending one empty sandboxed run: {statistics.median(starts):.0f} ms (median of 10).",
        f"A whole run_benchmark of the reference (CodeOptTask.execute: sandboxed harness + the server's "
        f"check of all {repeats + 1} outputs, the reference timed beside it): first of a run, "
        f"{first_call:.0f} ms; later ones {statistics.median(calls):.0f} ms (median of {len(calls)}).",
        f"Sandbox isolation here: {'; '.join(first_isolation())}.",
    ]


def first_isolation() -> list[str]:
    return run_sandboxed(
        "autoresearch_mcp.sandbox.script:run_script", {"source": "x = 1"}, Limits()
    ).isolation


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    lines = [
        "# codeopt-records: the speedup ceiling and the sandbox overhead",
        "",
        f"Python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPUs, "
        f"niceness {os.nice(0)}; "
        f"command: `python benchmarks/codeopt_limits.py --records {args.records} --repeats {args.repeats} "
        f"--rounds {args.rounds}`.",
        "",
        *catalogue(args.records, args.repeats),
        "",
        *overhead(args.records, args.repeats, args.rounds),
        "",
        f"Load average (1 min) at start / end: {load_before:.2f} / {os.getloadavg()[0]:.2f} "
        "(other processes on the machine add noise to every figure).",
    ]
    sys.stdout.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
