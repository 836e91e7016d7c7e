"""The long run only memory can finish (issue 30): one `compare` folder per mode, each holding one run of
many iterations with a real model, read side by side.

For each run it says what ended it (the budget, or a prompt that no longer fits the model's window),
then per block of iterations the billed tokens per iteration (what the provider counted: input and
output), the prompt the provider counted at the block's last call, the median latency of a call and the
best metric so far; then whether the stateful run's billed cost per iteration stayed flat (iterations
101-110 against 191-200, within 10%), and a figure of both curves (best metric so far and latency per
call, by iteration).

Everything comes from the folders' results.json (per-iteration rows) and transcripts (each call's
latency and the provider's usage).

Usage: python benchmarks/long_run.py DIR [DIR ...] [--block 20] [--figure PATH]
"""

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from autoresearch_mcp.contract.transcript import load_transcript

FLAT = ((101, 110), (191, 200))  # the two windows of iterations whose cost must agree within 10%


def load(folder: Path) -> list[tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]]:
    """Each run of a folder with its transcript's calls."""
    results = json.loads((folder / "results.json").read_text())
    return [
        (results, run, load_transcript(folder / "transcripts" / f"{run['mode']}-{run['seed']}.jsonl.gz"))
        for run in results["runs"]
    ]


def billed(call: dict[str, Any]) -> int:
    b = call.get("billed") or {}
    return int(b.get("input") or 0) + int(b.get("output") or 0)


def per_iteration_cost(calls: list[dict[str, Any]], first: int, last: int) -> float | None:
    """Mean billed tokens per iteration over iterations first..last (every call made toward each)."""
    by_iteration: dict[int, int] = {}
    for call in calls:
        if first <= call["iteration"] <= last:
            by_iteration[call["iteration"]] = by_iteration.get(call["iteration"], 0) + billed(call)
    return statistics.fmean(by_iteration.values()) if by_iteration else None


def block_rows(run: dict[str, Any], calls: list[dict[str, Any]], block: int) -> list[str]:
    rows = []
    last_iteration = max((c["iteration"] for c in calls), default=0)
    best = {row["iteration"]: row["best_metric"] for row in run["per_iteration"]}
    for start in range(1, last_iteration + 1, block):
        end = min(start + block - 1, last_iteration)
        inside = [c for c in calls if start <= c["iteration"] <= end]
        if not inside:
            continue
        cost = per_iteration_cost(calls, start, end)
        prompt = (inside[-1].get("billed") or {}).get("input")
        latency = statistics.median(c["latency_s"] for c in inside)
        so_far = [best[i] for i in best if i <= end and best[i] is not None]
        metric = f"{so_far[-1]:.4f}" if so_far else "none"
        rows.append(
            f"| {run['mode']} | {start}-{end} | {len(inside)} | {cost:,.0f} | {prompt or 0:,} | "
            f"{latency:.1f} | {metric} |"
        )
    return rows


def figure(runs: list[tuple[dict[str, Any], list[dict[str, Any]]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for run, calls in runs:
        rows = [r for r in run["per_iteration"] if r["best_metric"] is not None]
        left.plot([r["iteration"] for r in rows], [r["best_metric"] for r in rows], label=run["mode"])
        right.plot(
            [c["iteration"] for c in calls], [c["latency_s"] for c in calls], ".", ms=3, label=run["mode"]
        )
    left.set(xlabel="iteration", ylabel="best metric so far", title="Best so far")
    right.set(xlabel="iteration", ylabel="seconds", title="Latency of each LLM call")
    for ax in (left, right):
        ax.legend()
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--block", type=int, default=20, help="iterations per row (default: 20)")
    parser.add_argument("--figure", type=Path, help="write both curves to this PNG")
    args = parser.parse_args(argv)

    loaded = [each for folder in args.folders for each in load(folder)]
    first = loaded[0][0]
    out = [
        f"task {first['task']}, {first['iterations']} iterations, llm {first['llm']}, "
        f"sampling {json.dumps(first.get('sampling'))}",
        "",
        "| mode | experiments | LLM calls | best | billed tokens | stop |",
        "|---|---|---|---|---|---|",
    ]
    for _, run, calls in loaded:
        t = run["totals"]
        best = f"{t['best_metric']:.4f}" if t["best_metric"] is not None else "none"
        total = sum(billed(c) for c in calls)
        out.append(
            f"| {run['mode']} | {t['experiments']} | {t['llm_calls']} | {best} | {total:,} | "
            f"{run['stop_reason']}: {run.get('stop_detail') or ''} |"
        )
    out += [
        "",
        "| mode | iterations | calls | billed per iteration | prompt at the last call | median latency s | best so far |",
        "|---|---|---|---|---|---|---|",
    ]
    for _, run, calls in loaded:
        out += block_rows(run, calls, args.block)
    for _, run, calls in loaded:
        if run["mode"] != "stateful":
            continue
        early, late = (per_iteration_cost(calls, a, b) for a, b in FLAT)
        if early is None or late is None:
            out.append(f"\nstateful: iterations {FLAT[1][0]}-{FLAT[1][1]} not reached: flatness not measured")
            continue
        change = (late - early) / early
        verdict = "met" if abs(change) <= 0.10 else "missed"
        out.append(
            f"\nstateful billed per iteration: {early:,.1f} at {FLAT[0][0]}-{FLAT[0][1]}, {late:,.1f} at "
            f"{FLAT[1][0]}-{FLAT[1][1]} ({change:+.1%}; within 10%: {verdict})"
        )
    print("\n".join(out))
    if args.figure:
        figure([(run, calls) for _, run, calls in loaded], args.figure)
    return 0


if __name__ == "__main__":
    sys.exit(main())
