"""What running a task folder's script through the server costs on top of running it directly.

Side by side, interleaved, medians over repeats: the same script (a task folder whose script does
nearly nothing but print its metric, so that the difference is the overhead) run
- directly: `python train.py` with AUTORESEARCH_PARAMS set, as its owner would run it;
- through the server: one experiment (RunService.run_experiment: validation, the store's write before
  and after, the sandbox: a fresh working directory, namespaces, Landlock, limits, the harness
  process), in process, without MCP.

    python benchmarks/folder_overhead.py --repeats 30 --out benchmarks/folder_overhead.md
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


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
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
        run, _ = service.runs.start_run("overhead", args.repeats + 1, None, 1, None)
        service.experiments.run_experiment(
            run.id, {"x": -1.0}, None
        )  # warm: imports, the first database writes
        direct, served = [], []
        for i in range(args.repeats):
            env = {**os.environ, "AUTORESEARCH_PARAMS": json.dumps({"x": float(i)})}
            started = time.perf_counter()
            subprocess.run([sys.executable, "train.py"], cwd=folder, env=env, check=True, capture_output=True)
            direct.append(time.perf_counter() - started)
            started = time.perf_counter()
            result = service.experiments.run_experiment(run.id, {"x": float(i)}, None)
            served.append(time.perf_counter() - started)
            assert result.experiment.status == "ok", result.experiment.error_tail
    d, s = statistics.median(direct), statistics.median(served)
    differences = sorted(b - a for a, b in zip(direct, served, strict=True))
    lines = [
        "# Task folder overhead: a script through the server vs run directly",
        "",
        f"Command: `python benchmarks/folder_overhead.py --repeats {args.repeats}`",
        "",
        f"Machine: {platform.platform()}, {os.cpu_count()} logical CPUs, Python {platform.python_version()}; "
        f"1-minute load average {os.getloadavg()[0]:.2f} at the end.",
        "",
        "| | median (ms) | min (ms) | max (ms) |",
        "|---|---|---|---|",
        f"| `python train.py` directly | {d * 1000:.0f} | {min(direct) * 1000:.0f} | {max(direct) * 1000:.0f} |",
        f"| one experiment through the server | {s * 1000:.0f} | {min(served) * 1000:.0f} | {max(served) * 1000:.0f} |",
        "",
        f"Overhead per experiment (paired differences, {args.repeats} interleaved pairs): median "
        f"**{statistics.median(differences) * 1000:.0f} ms** (quartiles {differences[len(differences) // 4] * 1000:.0f}"
        f"-{differences[3 * len(differences) // 4] * 1000:.0f} ms); target: at most 300 ms.",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
