"""What a task folder's `[evaluate]` step adds to one experiment.

Side by side, interleaved, medians over repeats, in one interpreter: the same nearly empty script (it
writes its guess to a file and prints a metric) as two task folders, one without `[evaluate]` and one
whose evaluator reads that file and a hidden answer and prints the metric. Both go through the server
in process (RunService.run_experiment: validation, the store, the sandbox), so the paired difference is
the evaluator's step: the outputs copied out, a fresh directory laid out, the evaluator's own
interpreter started under the same boundary.

    python benchmarks/evaluator_overhead.py --repeats 30 --out benchmarks/evaluator_overhead.md
"""

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

SCRIPT = (
    "import json, os\n"
    'x = json.loads(os.environ["AUTORESEARCH_PARAMS"])["x"]\n'
    'open("guess.txt", "w").write(str(x))\n'
    'print(f"loss: {x ** 2}")\n'
)
EVALUATOR = (
    'guess, answer = float(open("guess.txt").read()), float(open("secret/answer.txt").read())\n'
    'print(f"loss: {(guess - answer) ** 2}")\n'
)
TOML = """[task]
name = "{name}"
command = ["python", "train.py"]
metric = "loss"
direction = "minimize"
timeout_s = 30

[params.x]
type = "float"
low = -1000000.0
high = 1000000.0
{evaluate}"""
EVALUATE = """
[evaluate]
command = ["python", "evaluate.py"]
reads = ["secret/"]
outputs = ["guess.txt"]
"""


def folder(root: Path, name: str, judged: bool) -> Path:
    path = root / name
    (path / "secret").mkdir(parents=True)
    (path / "secret" / "answer.txt").write_text("0.5\n")
    (path / "train.py").write_text(SCRIPT)
    (path / "evaluate.py").write_text(EVALUATOR)
    (path / "autoresearch.toml").write_text(TOML.format(name=name, evaluate=EVALUATE if judged else ""))
    return path


def measure(repeats: int) -> dict[str, list[float]]:
    """`repeats` interleaved pairs (the order alternating), in seconds."""
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["AUTORESEARCH_DATA_DIR"] = tmp
        from autoresearch_mcp.server.research import Research
        from autoresearch_mcp.server.settings import ServerSettings

        root = Path(tmp)
        folders = [str(folder(root, "plain", False)), str(folder(root, "judged", True))]
        service = Research(ServerSettings(db_path=root / "runs.db", task_dirs=folders)).open()
        runs = {
            name: service.runs.start_run(name, repeats + 1, None, 1, None)[0].id
            for name in ("plain", "judged")
        }
        for run_id in runs.values():  # warm: imports, the first writes
            service.experiments.run_experiment(run_id, {"x": -1.0}, None)
        samples: dict[str, list[float]] = {"plain": [], "judged": []}
        for i in range(repeats):
            for name in ("plain", "judged") if i % 2 == 0 else ("judged", "plain"):
                started = time.perf_counter()
                result = service.experiments.run_experiment(runs[name], {"x": float(i)}, None)
                samples[name].append(time.perf_counter() - started)
                assert result.experiment.status == "ok", result.experiment.error_tail
    return samples


def report(repeats: int) -> list[str]:
    samples = measure(repeats)
    plain, judged = samples["plain"], samples["judged"]
    differences = sorted(b - a for a, b in zip(plain, judged, strict=True))
    q1, q3 = differences[len(differences) // 4], differences[3 * len(differences) // 4]
    return [
        "# The `[evaluate]` step: one experiment with an evaluator against the same without",
        "",
        f"Command: `python benchmarks/evaluator_overhead.py --repeats {repeats}`",
        "",
        f"Machine: {platform.platform()}, {os.cpu_count()} logical CPUs, Python {platform.python_version()}; "
        f"1-minute load average {os.getloadavg()[0]:.2f} at the end.",
        "",
        "| one experiment through the server | median (ms) | min (ms) | max (ms) |",
        "|---|---:|---:|---:|",
        f"| without `[evaluate]` | {statistics.median(plain) * 1000:.0f} | {min(plain) * 1000:.0f} | "
        f"{max(plain) * 1000:.0f} |",
        f"| with `[evaluate]` | {statistics.median(judged) * 1000:.0f} | {min(judged) * 1000:.0f} | "
        f"{max(judged) * 1000:.0f} |",
        "",
        f"The evaluator's step (paired differences, {repeats} interleaved pairs): median "
        f"**{statistics.median(differences) * 1000:.0f} ms** (quartiles {q1 * 1000:.0f}-{q3 * 1000:.0f} ms); "
        "target: at most 150 ms.",
    ]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    text = "\n".join(report(args.repeats)) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
