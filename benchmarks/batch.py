"""Issue 48's first target: a batch per turn against one experiment per turn, with the scripted double
(a deterministic test double, not a language model: this measures what the agent sends and how fast the
server's workers get through the budget, not what a model decides).

hpo-covertype, `--batch 4 --workers 2` against `--batch 1 --workers 1`, the same budget and seeds. For
each: billed tokens per experiment (the transcript's `billed`: tiktoken's count for the double), wall
seconds per experiment (the whole `run` command, server start included, the same for both), and the
mean best F1 with its standard deviation over the seeds. Writes a markdown table.

    python benchmarks/batch.py --out benchmarks/batch.md                  # 40 experiments, 42/123/456
    python benchmarks/batch.py --budget 6 --seeds 42 --out /tmp/batch.md  # a quick look

Run it on a quiet machine: wall time is what it compares.
"""

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pydantic import BaseModel

from autoresearch_mcp.server.tasks.covertype import SAMPLE
from autoresearch_mcp.server.tasks.registry import BUILTIN

COVTYPE_20K = BUILTIN / "hpo-covertype" / SAMPLE  # the shipped sample
SETUPS = {"sequential": ("1", "1"), "batch": ("4", "2")}  # name -> (--batch, --workers)
_BEST = re.compile(r"^best \S+ (-?\d+(?:\.\d+)?) at #", re.MULTILINE)
_EXPERIMENTS = re.compile(r"^(\d+) experiments, (\d+) LLM calls", re.MULTILINE)


class Measured(BaseModel):
    setup: str
    seed: int
    experiments: int
    calls: int
    billed: int  # input + output tokens over every call
    wall_s: float
    best: float | None


def measure(setup: str, seed: int, budget: int, task: str, data: Path, work: Path) -> Measured:
    batch, workers = SETUPS[setup]
    transcript = work / f"{setup}-{seed}.jsonl"
    command = [
        sys.executable, "-m", "autoresearch_mcp.cli", "run", "--task", task, "--llm", "scripted",
        "--budget", str(budget), "--seed", str(seed), "--batch", batch, "--workers", workers, "--quiet",
        "--db", str(work / f"{setup}-{seed}.db"), "--transcript", str(transcript),
    ]  # fmt: skip
    if data.exists():
        command += ["--data", str(data)]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    counted = _EXPERIMENTS.search(done.stdout)
    best = _BEST.search(done.stdout)
    if counted is None:
        raise SystemExit(f"no experiment count in the output of {' '.join(command)}:\n{done.stdout}")
    lines = [json.loads(line) for line in transcript.read_text().splitlines()]
    billed = sum(line["billed"]["input"] + line["billed"]["output"] for line in lines)
    return Measured(
        setup=setup,
        seed=seed,
        experiments=int(counted[1]),
        calls=int(counted[2]),
        billed=billed,
        wall_s=wall,
        best=float(best[1]) if best else None,
    )


def table(rows: list[Measured], budget: int, task: str, seeds: list[int]) -> str:
    out = [
        f"# A batch per turn: {task}, {budget} experiments, seeds {'/'.join(map(str, seeds))}",
        "",
        "Scripted double (a deterministic test double, no language model). `benchmarks/batch.py`.",
        "",
        "| setup | flags | experiments | LLM calls | billed tokens / experiment | wall s / experiment |"
        " mean best (sd) |",
        "|---|---|---|---|---|---|---|",
    ]
    ratios: dict[str, tuple[float, float]] = {}
    for setup, (batch, workers) in SETUPS.items():
        mine = [r for r in rows if r.setup == setup]
        experiments = sum(r.experiments for r in mine)
        tokens = sum(r.billed for r in mine) / experiments
        wall = sum(r.wall_s for r in mine) / experiments
        ratios[setup] = (tokens, wall)
        bests = [r.best for r in mine if r.best is not None]
        sd = statistics.stdev(bests) if len(bests) > 1 else 0.0
        mean = f"{statistics.mean(bests):.4f} ({sd:.4f})" if bests else "-"
        out.append(
            f"| {setup} | `--batch {batch} --workers {workers}` | {experiments} | {sum(r.calls for r in mine)}"
            f" | {tokens:.0f} | {wall:.2f} | {mean} |"
        )
    (seq_tokens, seq_wall), (tokens, wall) = ratios["sequential"], ratios["batch"]
    out += [
        "",
        f"Batch against sequential: billed tokens per experiment {tokens / seq_tokens:.0%}, wall per"
        f" experiment {wall / seq_wall:.0%}.",
        "",
    ]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="hpo-covertype")
    parser.add_argument("--budget", type=int, default=40)
    parser.add_argument("--seeds", default="42,123,456")
    parser.add_argument("--data", type=Path, default=COVTYPE_20K, help="the Covertype sample to measure on")
    parser.add_argument("--out", type=Path, required=True, help="the markdown table to write")
    args = parser.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    rows: list[Measured] = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in seeds:
            for setup in SETUPS:
                rows.append(measure(setup, seed, args.budget, args.task, args.data, Path(tmp)))
                print(rows[-1].model_dump_json(), flush=True)
    args.out.write_text(table(rows, args.budget, args.task, seeds))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
