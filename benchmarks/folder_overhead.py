"""What running a task folder's script through the server costs on top of running it directly.

Side by side, interleaved, medians over repeats: the same script (a task folder whose script does
nearly nothing but print its metric, so that the difference is the overhead) run
- directly: `python train.py` with AUTORESEARCH_PARAMS set, as its owner would run it;
- through the server: one experiment (RunService.run_experiment: validation, the store's write before
  and after, the sandbox: a fresh working directory, namespaces, Landlock, limits, the harness
  process), in process, without MCP.

    python benchmarks/folder_overhead.py --repeats 30 --out benchmarks/folder_overhead.md

With `--other PYTHON` (another checkout's environment, e.g. main's), each of `--rounds` rounds runs one
fresh interpreter per version, the order alternating from round to round so that load on the machine
falls on both alike, and the report sets the two side by side: the medians of the rounds' medians, and
their ratio (this / other).

    python benchmarks/folder_overhead.py --other /tmp/old-venv/bin/python --label "main at 7488d57" \\
        --rounds 6 --repeats 15 --out benchmarks/folder_overhead.md
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SCRIPT = (
    'import json, os\np = json.loads(os.environ["AUTORESEARCH_PARAMS"])\nprint(f"loss: {p[\'x\'] ** 2}")\n'
)
TOML = """[task]
name = "overhead"
command = ["python", "train.py"]
metric = "loss"
direction = "minimize"
timeout_s = 30

[params.x]
type = "float"
low = -1000000.0
high = 1000000.0
"""


def measure(repeats: int) -> dict[str, list[float]]:
    """In this interpreter, with its own autoresearch_mcp: `repeats` interleaved pairs, in seconds."""
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["AUTORESEARCH_DATA_DIR"] = tmp
        from autoresearch_mcp.server.research import Research
        from autoresearch_mcp.server.settings import ServerSettings

        folder = Path(tmp) / "overhead"
        folder.mkdir()
        (folder / "train.py").write_text(SCRIPT)
        (folder / "autoresearch.toml").write_text(TOML)
        settings = ServerSettings(db_path=Path(tmp) / "runs.db", task_dirs=[str(folder)])
        service = Research(settings).open()
        run, _ = service.runs.start_run("overhead", repeats + 1, None, 1, None)
        service.experiments.run_experiment(run.id, {"x": -1.0}, None)  # warm: imports, the first writes
        direct, served = [], []
        for i in range(repeats):
            env = {**os.environ, "AUTORESEARCH_PARAMS": json.dumps({"x": float(i)})}
            started = time.perf_counter()
            subprocess.run([sys.executable, "train.py"], cwd=folder, env=env, check=True, capture_output=True)
            direct.append(time.perf_counter() - started)
            started = time.perf_counter()
            result = service.experiments.run_experiment(run.id, {"x": float(i)}, None)
            served.append(time.perf_counter() - started)
            assert result.experiment.status == "ok", result.experiment.error_tail
    return {"direct": direct, "served": served}


def one_version(repeats: int) -> list[str]:
    samples = measure(repeats)
    direct, served = samples["direct"], samples["served"]
    d, s = statistics.median(direct), statistics.median(served)
    differences = sorted(b - a for a, b in zip(direct, served, strict=True))
    return [
        "# Task folder overhead: a script through the server vs run directly",
        "",
        f"Command: `python benchmarks/folder_overhead.py --repeats {repeats}`",
        "",
        f"Machine: {platform.platform()}, {os.cpu_count()} logical CPUs, Python {platform.python_version()}; "
        f"1-minute load average {os.getloadavg()[0]:.2f} at the end.",
        "",
        "| | median (ms) | min (ms) | max (ms) |",
        "|---|---|---|---|",
        f"| `python train.py` directly | {d * 1000:.0f} | {min(direct) * 1000:.0f} | {max(direct) * 1000:.0f} |",
        f"| one experiment through the server | {s * 1000:.0f} | {min(served) * 1000:.0f} | {max(served) * 1000:.0f} |",
        "",
        f"Overhead per experiment (paired differences, {repeats} interleaved pairs): median "
        f"**{statistics.median(differences) * 1000:.0f} ms** (quartiles {differences[len(differences) // 4] * 1000:.0f}"
        f"-{differences[3 * len(differences) // 4] * 1000:.0f} ms); target: at most 300 ms.",
    ]


def round_of(python: str, repeats: int) -> dict[str, float]:
    """One fresh interpreter of a version: the medians of its pairs, in ms."""
    done = subprocess.run(
        [python, str(Path(__file__).resolve()), "--measure", "--repeats", str(repeats)],
        capture_output=True,
        text=True,
        check=True,
        cwd="/",
    )
    samples = json.loads(done.stdout.strip().splitlines()[-1])
    direct, served = samples["direct"], samples["served"]
    return {
        "direct": statistics.median(direct) * 1000,
        "served": statistics.median(served) * 1000,
        "overhead": statistics.median(b - a for a, b in zip(direct, served, strict=True)) * 1000,
    }


def side_by_side(other: str, label: str, rounds: int, repeats: int) -> list[str]:
    pythons = {"other": other, "this": sys.executable}
    found: dict[str, list[dict[str, float]]] = {"other": [], "this": []}
    for round_ in range(rounds):
        for name in ("other", "this") if round_ % 2 == 0 else ("this", "other"):
            found[name].append(round_of(pythons[name], repeats))
    rows = []
    names = {"direct": "`python train.py` directly", "served": "one experiment through the server"}
    names["overhead"] = "overhead per experiment (served - direct, paired)"
    for key, what in names.items():
        o = statistics.median(r[key] for r in found["other"])
        t = statistics.median(r[key] for r in found["this"])
        rows.append(f"| {what} | {o:.0f} | {t:.0f} | {t - o:+.0f} | {t / o:.2f}x |")
    return [
        "# Task folder overhead: this checkout against another, side by side",
        "",
        f"Command: `python benchmarks/folder_overhead.py --other {other} --label '{label}' --rounds {rounds} "
        f"--repeats {repeats}`",
        "",
        f"Machine: {platform.platform()}, {os.cpu_count()} logical CPUs, Python {platform.python_version()}; "
        f"1-minute load average {os.getloadavg()[0]:.2f} at the end.",
        f"Other: {label or other}. Each of {rounds} rounds runs one fresh interpreter per version, the order "
        f"alternating, each {repeats} interleaved pairs (direct, then through the server); a figure is the "
        "median over the rounds of each round's median, in ms; the ratio is this / other of those medians.",
        "",
        "| | other | this | this - other | this / other |",
        "|---|---:|---:|---:|---:|",
        *rows,
    ]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--other", help="the Python of another checkout's environment, to set beside this")
    parser.add_argument("--label", default="", help="what the other checkout is (e.g. main at 7488d57)")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)  # one round, as JSON
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.repeats)))
        return 0
    lines = (
        side_by_side(args.other, args.label, args.rounds, args.repeats)
        if args.other
        else one_version(args.repeats)
    )
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
