"""How far can codeopt-records go, and what does the sandbox cost? Prints a Markdown report.

1. Every step of the rewrite catalogue (tests/codeopt_rewrites.py), timed in this process as the harness
   times each call (a fresh input per call, gc off during the call, median after one warm-up): the last
   step is the fastest pure-Python version we have, i.e. the practical ceiling of the speedup metric.
2. Whole run_benchmark calls through the server's trusted benchmark path (a sized copy of the shipped
   folder, given as a task folder, as `serve --task-dir` would): the reference and the fastest rewrite,
   each timed beside the original in the sandboxed harness, with the wall time of the call.

--records sets the copy's RECORDS (records.py), --repeats its `calls` ([benchmark]), --rounds how many
runs part 2 makes. The harness confines the process it runs in and forks every call, so it no longer
runs unsandboxed in this process or a plain child: part 2 has no such columns (benchmarks/codeopt_limits.md
holds the last table that had them, from the harness before task folders).

Usage: python benchmarks/codeopt_limits.py [--records 10000] [--repeats 20] [--rounds 5] > benchmarks/codeopt_limits.md
"""

import argparse
import gc
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from autoresearch_mcp.contract.models import Experiment
from autoresearch_mcp.sandbox.runner import Limits, run_sandboxed
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.settings import ServerSettings

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the catalogue of rewrites
from codeopt_rewrites import REWRITES, codeopt_folder, make_records, source_after


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


def benchmark(service: Research, run_id: str, source: str, description: str) -> tuple[Experiment, float]:
    service.train_py.modify_train_py(run_id, description, source, None)
    start = time.perf_counter()
    experiment = service.experiments.run_benchmark(run_id).experiment
    wall = (time.perf_counter() - start) * 1000
    assert experiment.status == "ok", experiment.error_tail
    return experiment, wall


def overhead(n: int, repeats: int, rounds: int) -> list[str]:
    """Whole run_benchmark calls on a sized copy of the folder, one fresh run per round: the reference
    (the run's first benchmark), then the fastest rewrite, then the reference again (a later call)."""
    versions = {
        "reference, first of a run": source_after(0),
        "fastest rewrite": source_after(len(REWRITES)),
        "reference, later": source_after(0),
    }
    walls: dict[str, list[float]] = {label: [] for label in versions}
    measured: dict[str, list[tuple[float, float, float]]] = {label: [] for label in versions}
    with tempfile.TemporaryDirectory() as tmp:
        folder = codeopt_folder(Path(tmp) / "codeopt-records", records=n, calls=repeats)
        settings = ServerSettings(db_path=Path(tmp) / "runs.db", task_dirs=[str(folder)])
        service = Research(settings).open()
        for round_ in range(rounds):
            run_id = service.runs.start_run("codeopt-records", 3, None, round_, "codeopt limits")[0].id
            for label, source in versions.items():
                experiment, wall = benchmark(service, run_id, source + f"# round {round_}\n", label)
                walls[label].append(wall)
                m = experiment.metrics
                measured[label].append((m["time_ms"], m["baseline_ms"], m["speedup"]))
        isolation = run_sandboxed(
            "autoresearch_mcp.sandbox.script:run_script", {"source": "x = 1"}, Limits()
        ).isolation
        starts = []
        for _ in range(10):
            start = time.perf_counter()
            run_sandboxed("autoresearch_mcp.sandbox.script:run_script", {"source": "x = 1"}, Limits())
            starts.append((time.perf_counter() - start) * 1000)
    rows = []
    for label in versions:
        ms, base, speedup = (statistics.median(column) for column in zip(*measured[label], strict=True))
        rows.append(
            f"| {label} | {statistics.median(walls[label]):.0f} | {ms:.2f} | {base:.2f} | {speedup:.2f}x |"
        )
    return [
        f"## 2. Whole run_benchmark calls through the trusted benchmark path (medians of {rounds} runs)",
        "",
        f"One call = {repeats + 1} calls of the candidate and of the original beside it (and of the best "
        f"when it is neither), each on a fresh {n}-record input made in a fresh fork, outputs checked "
        "against the original's; the first of a version is profiled too. Wall: the whole run_benchmark "
        "in ms; time_ms and baseline_ms: the harness's median call of the candidate and the original.",
        "",
        "| candidate | wall (ms) | time_ms | baseline_ms | speedup |",
        "|---|---:|---:|---:|---:|",
        *rows,
        "",
        f"Starting and ending one empty sandboxed run: {statistics.median(starts):.0f} ms (median of 10).",
        f"Sandbox isolation here: {'; '.join(isolation)}.",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000, help="records per input (the copy's RECORDS)")
    parser.add_argument(
        "--repeats", type=int, default=20, help="timed calls per measurement (the copy's [benchmark] calls)"
    )
    parser.add_argument(
        "--rounds", type=int, default=5, help="part 2: runs, each benchmarking three versions"
    )
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
