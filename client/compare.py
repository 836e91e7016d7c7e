"""`autoresearch-mcp compare`: stateless and stateful side by side, same server build, same seeds.

Writes DIR/results.json (the schema in DESIGN.md), DIR/table.md and DIR/figure.png. Every figure is
computed from the runs' transcripts (tokens, calls) and the store (metrics, timestamps).
"""

import argparse
import asyncio
import json
import os
import statistics
from datetime import datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from autoresearch_mcp.client.check import AgentResult
from autoresearch_mcp.client.llm.base import LLMError
from autoresearch_mcp.client.meter import load_transcript, totals_by_iteration
from autoresearch_mcp.client.report_figure import write_figure, write_table
from autoresearch_mcp.client.run_cmd import SCRIPTED_NOTE, add_agent_arguments, check_agent_args, run_session
from autoresearch_mcp.contract.errors import ResearchError
from autoresearch_mcp.server.store import Store

MODES = ("stateless", "stateful")
MEASURES = ("context_tokens", "full_tokens", "cache_weighted_tokens", "output_tokens")


def configure(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser("compare", help="run stateless and stateful side by side and write results")
    add_agent_arguments(parser)
    parser.add_argument("--seeds", default="42,123,456", help="comma-separated seeds")
    parser.add_argument(
        "--modes",
        default="stateless,stateful",
        help="which agents to run (e.g. only stateful, for a window study)",
    )
    parser.add_argument("--out", type=Path, required=True, help="output directory")
    parser.add_argument(
        "--parallel",
        action="store_true",
        help="run the two modes of a seed at the same time, each with half the cores for training",
    )
    parser.set_defaults(func=main)


def _seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp).timestamp()


def per_iteration(result: AgentResult, store: Store) -> list[dict[str, Any]]:
    """One row per experiment: its tokens and calls (from the transcript), best so far, wall seconds."""
    calls = totals_by_iteration(load_transcript(result.transcript))
    run = store.get_run(result.run_id)
    experiments, _ = store.experiments(result.run_id)
    rows, best, previous = [], None, _seconds(run.created_at)
    better = (lambda a, b: a > b) if run.direction == "max" else (lambda a, b: a < b)
    for exp in experiments:
        if exp.status == "ok" and exp.metric is not None and (best is None or better(exp.metric, best)):
            best = exp.metric
        finished = _seconds(exp.finished_at or exp.started_at)
        t = calls.get(exp.iteration)
        rows.append(
            {
                "iteration": exp.iteration,
                "context_tokens": t.context if t else 0,
                "full_tokens": t.full if t else 0,
                "cache_weighted_tokens": t.cache_weighted if t else 0.0,
                "output_tokens": t.output if t else 0,
                "best_metric": best,
                "wall_s": round(finished - previous, 3),
                "llm_calls": t.calls if t else 0,
            }
        )
        previous = finished
    # Calls after the last experiment (e.g. the model saying DONE) still cost tokens: add them to it.
    extra = [t for i, t in calls.items() if i > len(rows)]
    if rows and extra:
        for t in extra:
            rows[-1]["context_tokens"] += t.context
            rows[-1]["full_tokens"] += t.full
            rows[-1]["cache_weighted_tokens"] += t.cache_weighted
            rows[-1]["output_tokens"] += t.output
            rows[-1]["llm_calls"] += t.calls
    return rows


def run_record(mode: str, seed: int, result: AgentResult, store: Store) -> dict[str, Any]:
    rows = per_iteration(result, store)
    run = store.get_run(result.run_id)
    wall = _seconds(run.finished_at or run.created_at) - _seconds(run.created_at)
    totals = {m: round(sum(r[m] for r in rows), 1) for m in MEASURES}
    totals.update(
        best_metric=rows[-1]["best_metric"] if rows else None,
        wall_s=round(wall, 2),
        llm_calls=result.llm_calls,
        experiments=len(rows),
    )
    return {
        "mode": mode,
        "seed": seed,
        "run_id": result.run_id,
        "stop_reason": result.stop_reason,
        "per_iteration": rows,
        "totals": totals,
    }


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for mode in MODES:
        mine = [r["totals"] for r in runs if r["mode"] == mode]
        if not mine:
            continue
        means = {
            k: round(statistics.fmean(t[k] for t in mine), 2) for k in (*MEASURES, "wall_s", "llm_calls")
        }
        bests = [t["best_metric"] for t in mine if t["best_metric"] is not None]
        means["best_metric"] = round(statistics.fmean(bests), 4) if bests else None
        calls = sum(t["llm_calls"] for t in mine)
        exps = sum(t["experiments"] for t in mine)
        means["llm_calls_per_experiment"] = round(calls / exps, 3) if exps else None
        summary[mode] = means
    if all(m in summary for m in MODES):
        summary["ratio"] = {
            m: round(summary["stateless"][m] / summary["stateful"][m], 2) if summary["stateful"][m] else None
            for m in MEASURES[:3]
        }
        summary["full_tokens_crossover_iteration"] = crossover(runs)
    return summary


def crossover(runs: list[dict[str, Any]]) -> int | None:
    """The first iteration from which stateful's cumulative full tokens stay below stateless's."""

    def mean_cumulative(mode: str) -> list[float]:
        series = [[row["full_tokens"] for row in r["per_iteration"]] for r in runs if r["mode"] == mode]
        length = min(len(s) for s in series)
        out, total = [], 0.0
        for i in range(length):
            total += statistics.fmean(s[i] for s in series)
            out.append(total)
        return out

    stateless, stateful = mean_cumulative("stateless"), mean_cumulative("stateful")
    first = None
    for i, (cost_stateless, cost_stateful) in enumerate(zip(stateless, stateful, strict=False), start=1):
        if cost_stateful >= cost_stateless:
            first = None
        elif first is None:
            first = i
    return first


async def compare(args: argparse.Namespace, seeds: list[int], progress: Progress) -> dict[str, Any]:
    out: Path = args.out
    db = out / "runs.db"
    args.db = db
    modes = [m for m in MODES if m in args.modes.split(",")]
    if args.parallel and args.hpo_threads is None and not args.server_url:
        # Share the cores between the modes' trainings: XGBoost thread teams that outnumber the cores
        # spin-wait for each other, and every experiment runs several times slower.
        args.hpo_threads = max(1, (os.cpu_count() or 1) // len(modes))
    task_bar = progress.add_task("compare", total=len(seeds) * len(modes))
    runs = []
    for seed in seeds:
        jobs = [
            run_session(
                args,
                mode=mode,
                seed=seed,
                transcript=out / "transcripts" / f"{mode}-{seed}.jsonl",
                name=f"compare {mode} seed {seed}",
            )
            for mode in modes
        ]
        progress.update(
            task_bar, description=f"seed {seed}: {' + '.join(modes) if args.parallel else 'running'}"
        )
        if args.parallel:
            results = await asyncio.gather(*jobs)
        else:
            results = []
            for job in jobs:
                results.append(await job)
                progress.advance(task_bar)
        if args.parallel:
            progress.advance(task_bar, len(modes))
        store = Store(db)
        runs += [run_record(mode, seed, result, store) for mode, result in zip(modes, results, strict=True)]
        store.close()
    llm = results[0]
    return {
        "task": args.task,
        "llm": args.llm if not llm.scripted else "scripted (deterministic test double, no language model)",
        "model": args.model,
        "window": "auto (messages since the last experiment)"
        if args.window is None
        else f"{args.window} messages",
        "iterations": args.iterations,
        "seeds": seeds,
        "parallel": args.parallel,
        "hpo_threads": args.hpo_threads,
        "runs": runs,
        "summary": summarise(runs),
    }


def main(args: argparse.Namespace) -> int:
    check_agent_args(args)
    unknown = set(args.modes.split(",")) - set(MODES)
    if unknown or not args.modes.strip():
        raise ResearchError(
            f"--modes takes stateless, stateful or both (comma-separated), not {args.modes!r}"
        )
    console = Console()
    seeds = [int(s) for s in str(args.seeds).split(",") if s.strip()]
    args.out.mkdir(parents=True, exist_ok=True)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} runs"),
        TimeElapsedColumn(),
        console=console,
    ) as progress:
        try:
            results = asyncio.run(compare(args, seeds, progress))
        except LLMError as exc:
            raise ResearchError(str(exc)) from None
    (args.out / "results.json").write_text(json.dumps(results, indent=2))
    write_table(results, args.out / "table.md")
    write_figure(results, args.out / "figure.png")
    console.print((args.out / "table.md").read_text(), markup=False)  # run names and reasons are text
    if results["llm"].startswith("scripted"):
        console.print(f"[yellow]{SCRIPTED_NOTE}[/]")
    return 0
