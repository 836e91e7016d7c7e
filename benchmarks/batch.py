"""Issue 48's first target: a batch per turn against one experiment per turn, with the scripted double
(a deterministic test double, not a language model: this measures what the agent sends and how fast the
server's workers get through the budget, not what a model decides).

hpo-covertype, `--batch 4 --workers 2` against `--batch 1 --workers 1`, the same budget and seeds. For
each: billed tokens per experiment (the transcript's `billed`: tiktoken's count for the double), wall
seconds per experiment (the whole `run` command, server start included, the same for both), and the
mean best F1 with its standard deviation over the seeds. Writes a markdown table.

    python benchmarks/batch.py --out benchmarks/batch.md                  # 40 experiments, 42/123/456
    python benchmarks/batch.py --budget 6 --seeds 42 --out /tmp/batch.md  # a quick look

With a real model, `--run-args` carries the `run` flags that reach it (`--llm` among them, in place of the
double) and `--keep` the databases and transcripts (gzipped) for the record; `--setups batch` measures
the batch half alone, against a committed sequential figure:

    python benchmarks/batch.py --setups batch --budget 16 --keep DIR --out DIR/table.md \
        --run-args "--llm openai --base-url http://127.0.0.1:8088/v1 --temperature 1.0 ..."

Run it on a quiet machine: wall time is what it compares.
"""

import argparse
import json
import re
import shlex
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pydantic import BaseModel

from autoresearch_mcp.client.compare import pack_transcripts
from autoresearch_mcp.server.tasks.covertype import SAMPLE
from autoresearch_mcp.server.tasks.registry import BUILTIN

COVTYPE_20K = BUILTIN / "hpo-covertype" / SAMPLE  # the shipped sample
SETUPS = {"sequential": ("1", "1"), "batch": ("4", "2")}  # name -> (--batch, --workers)
_BEST = re.compile(r"^best \S+ (-?\d+(?:\.\d+)?) at #", re.MULTILINE)
_EXPERIMENTS = re.compile(r"^(\d+) experiments?, (\d+) LLM calls?", re.MULTILINE)


class Measured(BaseModel):
    setup: str
    seed: int
    experiments: int
    calls: int
    billed: int  # input + output tokens over every call
    wall_s: float
    best: float | None
    proposed: int = 0  # the items of every reply (an experiment per call without --batch)
    refused: int = 0  # the server's refusals: an item it did not run, at no cost in budget


def _refusals(db: Path) -> int:
    conn = sqlite3.connect(db)
    try:
        return int(conn.execute("SELECT COUNT(*) FROM events WHERE kind = 'refusal'").fetchone()[0])
    finally:
        conn.close()


def measure(
    setup: str, seed: int, budget: int, task: str, data: Path, work: Path, run_args: list[str]
) -> Measured:
    batch, workers = SETUPS[setup]
    transcript = work / f"{setup}-{seed}.jsonl"
    db = work / f"{setup}-{seed}.db"
    llm = [] if "--llm" in run_args else ["--llm", "scripted"]
    command = [
        sys.executable, "-m", "autoresearch_mcp.cli", "run", "--task", task, *llm, *run_args,
        "--budget", str(budget), "--seed", str(seed), "--batch", batch, "--workers", workers, "--quiet",
        "--db", str(db), "--transcript", str(transcript),
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
    proposed = sum(line.get("batch", {}).get("proposed", 1) for line in lines)
    return Measured(
        setup=setup,
        seed=seed,
        experiments=int(counted[1]),
        calls=int(counted[2]),
        billed=billed,
        wall_s=wall,
        best=float(best[1]) if best else None,
        proposed=proposed,
        refused=_refusals(db),
    )


def gzip_transcripts(work: Path) -> None:
    """The transcripts gzipped as `compare` packs them (the same bytes for the same run), then only the
    packed ones kept."""
    pack_transcripts(work)
    for transcript in work.glob("*.jsonl"):
        transcript.unlink()


def table(rows: list[Measured], budget: int, task: str, seeds: list[int], run_args: list[str]) -> str:
    who = (
        f"`run {shlex.join(run_args)}`"
        if "--llm" in run_args
        else "Scripted double (a deterministic test double, no language model)"
    )
    out = [
        f"# A batch per turn: {task}, {budget} experiments, seeds {'/'.join(map(str, seeds))}",
        "",
        f"{who}. `benchmarks/batch.py`.",
        "",
        "| setup | flags | experiments | LLM calls | refused / items | billed tokens / experiment |"
        " wall s / experiment | mean best (sd) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    ratios: dict[str, tuple[float, float]] = {}
    for setup, (batch, workers) in SETUPS.items():
        mine = [r for r in rows if r.setup == setup]
        if not mine:
            continue
        experiments = sum(r.experiments for r in mine)
        tokens = sum(r.billed for r in mine) / experiments
        wall = sum(r.wall_s for r in mine) / experiments
        ratios[setup] = (tokens, wall)
        refused, items = sum(r.refused for r in mine), sum(r.proposed for r in mine)
        bests = [r.best for r in mine if r.best is not None]
        sd = statistics.stdev(bests) if len(bests) > 1 else 0.0
        mean = f"{statistics.mean(bests):.4f} ({sd:.4f})" if bests else "-"
        out.append(
            f"| {setup} | `--batch {batch} --workers {workers}` | {experiments} | {sum(r.calls for r in mine)}"
            f" | {refused}/{items} | {tokens:.0f} | {wall:.2f} | {mean} |"
        )
    if len(ratios) == len(SETUPS):
        (seq_tokens, seq_wall), (tokens, wall) = ratios["sequential"], ratios["batch"]
        out += [
            "",
            f"Batch against sequential: billed tokens per experiment {tokens / seq_tokens:.0%}, wall per"
            f" experiment {wall / seq_wall:.0%}.",
        ]
    out += [
        "",
        "Per run:",
        "",
        "| setup | seed | experiments | calls | items | refused | billed | wall s | best |",
    ]
    out.append("|---|---|---|---|---|---|---|---|---|")
    out += [
        f"| {r.setup} | {r.seed} | {r.experiments} | {r.calls} | {r.proposed} | {r.refused} | {r.billed}"
        f" | {r.wall_s:.0f} | {'-' if r.best is None else f'{r.best:.4f}'} |"
        for r in rows
    ]
    return "\n".join([*out, ""])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="hpo-covertype")
    parser.add_argument("--budget", type=int, default=40)
    parser.add_argument("--seeds", default="42,123,456")
    parser.add_argument("--data", type=Path, default=COVTYPE_20K, help="the Covertype sample to measure on")
    parser.add_argument("--out", type=Path, required=True, help="the markdown table to write")
    parser.add_argument("--setups", default=",".join(SETUPS), help="which setups, comma-separated")
    parser.add_argument("--run-args", default="", help="more `run` flags, e.g. a real model's --llm ...")
    parser.add_argument("--keep", type=Path, help="a folder to keep the databases and transcripts in")
    args = parser.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    setups = args.setups.split(",")
    if unknown := set(setups) - set(SETUPS):
        parser.error(f"unknown setups {sorted(unknown)}; known: {', '.join(SETUPS)}")
    run_args = shlex.split(args.run_args)
    rows: list[Measured] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or Path(tmp)  # kept: each run's files stay there as soon as it ends
        work.mkdir(parents=True, exist_ok=True)
        for seed in seeds:
            for setup in setups:
                rows.append(measure(setup, seed, args.budget, args.task, args.data, work, run_args))
                print(rows[-1].model_dump_json(), flush=True)
        if args.keep:
            gzip_transcripts(work)
    args.out.write_text(table(rows, args.budget, args.task, seeds, run_args))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
