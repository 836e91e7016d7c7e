"""What the sandbox costs, this checkout against another one, side by side. Prints a Markdown report.

Each round runs one fresh interpreter per version, the order alternating from round to round, so that
load on the machine falls on both alike; each interpreter measures, with its own `autoresearch_mcp`:
- an empty sandboxed run (`run_sandboxed` of `x = 1`: start, isolation, end), median of 5;
- the first run_benchmark of a codeopt-records run on the reference (on main that also timed the
  baseline in a sandbox run of its own; now the reference is timed beside the candidate);
- a later run_benchmark, of the reference against a best that is not the reference (main: candidate and
  best; now candidate, reference and best);
- with --hpo, one small hpo-covertype training (10 trees of depth 2 on the 2,000-row fixture).
Both go through the version's RunService and the shipped task folders (a copy of codeopt-records sized
by --records and --repeats), so the other checkout must have them too (421e464 or later); against an
older one, run this script as of 5f57a06 (the plugin tasks).

Usage (the other checkout installed in its own environment, e.g. main at /tmp/main-venv):
    python benchmarks/sandbox_overhead.py --other /tmp/main-venv/bin/python --rounds 7 --hpo \
        > benchmarks/sandbox_overhead.md
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "data" / "covtype_2k.csv.gz"
MEASURES = {
    "empty": "an empty sandboxed run",
    "first": "first codeopt benchmark of a run (reference)",
    "later": "later codeopt benchmark (against a best)",
    "hpo": "one small hpo-covertype training",
}


def measure(records: int, repeats: int, hpo: bool) -> dict[str, float]:
    """In the interpreter of one version, through its RunService as a server runs it: wall times in ms."""
    import tempfile

    from autoresearch_mcp.sandbox.runner import Limits, run_sandboxed
    from autoresearch_mcp.server.research import Research
    from autoresearch_mcp.server.settings import ServerSettings

    sys.path.insert(0, str(ROOT / "tests"))  # the catalogue of rewrites, and the sized folder copy
    from codeopt_rewrites import REFERENCE_SOURCE, codeopt_folder, source_after

    found: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = codeopt_folder(Path(tmp) / "codeopt-records", records=records, calls=repeats)
        settings = ServerSettings(
            db_path=Path(tmp) / "runs.db",
            task_dirs=[str(folder)],
            covtype_path=str(FIXTURE),
            hpo_threads=2,
            hpo_wall_s=600,
        )
        service = Research(settings).open()
        empty = []
        for _ in range(5):
            start = time.perf_counter()
            run_sandboxed("autoresearch_mcp.sandbox.script:run_script", {"source": "x = 1"}, Limits())
            empty.append((time.perf_counter() - start) * 1000)
        found["empty"] = statistics.median(empty)

        def timed(run_id: str, source: str) -> float:
            service.train_py.modify_train_py(run_id, "sandbox overhead", source, None)
            start = time.perf_counter()
            experiment = service.experiments.run_benchmark(run_id).experiment
            assert experiment.status == "ok", experiment.error_tail
            return (time.perf_counter() - start) * 1000

        run_id = service.runs.start_run("codeopt-records", 3, None, 1, "sandbox overhead")[0].id
        found["first"] = timed(run_id, REFERENCE_SOURCE + "# the first\n")
        timed(run_id, source_after(3))  # the best, which the later benchmark times beside it
        found["later"] = timed(run_id, REFERENCE_SOURCE + "# a later one\n")
        if hpo:
            run_id = service.runs.start_run("hpo-covertype", 1, None, 42, "sandbox overhead")[0].id
            start = time.perf_counter()
            trained = service.experiments.run_experiment(run_id, {"n_estimators": 10, "max_depth": 2}, None)
            found["hpo"] = (time.perf_counter() - start) * 1000
            assert trained.experiment.status == "ok", trained.experiment.error_tail
    return found


def run_one(python: str, args: argparse.Namespace) -> dict[str, float]:
    command = [python, __file__, "--measure", "--records", str(args.records), "--repeats", str(args.repeats)]
    # From a directory of its own: the repository root would put this checkout's package on the path.
    done = subprocess.run(
        command + (["--hpo"] if args.hpo else []), capture_output=True, text=True, check=True, cwd="/"
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def version_of(python: str) -> str:
    code = "import autoresearch_mcp, pathlib; print(pathlib.Path(autoresearch_mcp.__file__).parents[1])"
    where = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True, cwd="/")
    where = where.stdout.strip()
    try:
        head = subprocess.run(
            ["git", "-C", where, "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        )
        return f"{where} ({head.stdout.strip() or 'not a git checkout'})"
    except OSError:
        return where


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--other", help="the Python of the other checkout (e.g. main's environment)")
    parser.add_argument("--label", default="", help="what the other checkout is (e.g. main at dcf55fd)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--hpo", action="store_true")
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.records, args.repeats, args.hpo)))
        return
    if not args.other:
        parser.error("--other PYTHON is required")
    versions = {"other": args.other, "this": sys.executable}
    load_before, started = os.getloadavg()[0], time.monotonic()
    samples: dict[str, list[dict[str, float]]] = {"other": [], "this": []}
    for round_ in range(args.rounds):
        for name in ("other", "this") if round_ % 2 == 0 else ("this", "other"):
            samples[name].append(run_one(versions[name], args))
    keys = [key for key in MEASURES if key in samples["this"][0]]
    rows = []
    for key in keys:
        other = [s[key] for s in samples["other"]]
        this = [s[key] for s in samples["this"]]
        ratios = [t / o for t, o in zip(this, other, strict=True)]
        rows.append(
            f"| {MEASURES[key]} | {statistics.median(other):.0f} | {statistics.median(this):.0f} "
            f"| {statistics.median(this) - statistics.median(other):+.0f} | {statistics.median(ratios):.2f}x |"
        )
    lines = [
        "# The sandbox's cost: this checkout against another, side by side",
        "",
        f"Python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPUs; command: "
        f"`python benchmarks/sandbox_overhead.py --other {args.other} --label '{args.label}' --rounds {args.rounds} --records "
        f"{args.records} --repeats {args.repeats}{' --hpo' if args.hpo else ''}`; "
        f"{time.monotonic() - started:.0f} s.",
        "",
        f"- other: {version_of(args.other)}{' = ' + args.label if args.label else ''}",
        f"- this: {version_of(sys.executable)}",
        "",
        f"Wall time in ms, median of {args.rounds} rounds (one fresh interpreter per version and round, "
        "the order alternating); the ratio is the median of the rounds' this / other.",
        "",
        "| measure | other | this | this - other | this / other |",
        "|---|---:|---:|---:|---:|",
        *rows,
        "",
        f"Load average (1 min) at start / end: {load_before:.2f} / {os.getloadavg()[0]:.2f} "
        "(other processes on the machine add noise to every figure).",
    ]
    sys.stdout.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
