"""`autoresearch-mcp compare`: stateless and stateful side by side, same server build, same seeds.

Writes DIR/results.json (its fields: docs/benchmarks.md), DIR/table.md and DIR/figure.png. Every figure is
computed from the runs' transcripts (tokens, calls) and what the server returns through its tools
(metrics, timestamps), so it works the same against --server-url as against a spawned server.
"""

import argparse
import asyncio
import gzip
import json
import os
import shutil
import statistics
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from autoresearch_mcp.client.agent_args import add_agent_arguments, check_agent_args, seeds_arg
from autoresearch_mcp.client.billing import run_cost
from autoresearch_mcp.client.check import AgentResult
from autoresearch_mcp.client.connect import connect
from autoresearch_mcp.client.live import SCRIPTED_NOTE
from autoresearch_mcp.client.llm.base import LLMError
from autoresearch_mcp.client.report_figure import write_figure, write_table
from autoresearch_mcp.client.run_cmd import run_session, spawn_args
from autoresearch_mcp.contract.errors import ResearchError
from autoresearch_mcp.contract.models import Run
from autoresearch_mcp.contract.transcript import TokenTotals, load_transcript, totals, totals_by_iteration

# The paper's baseline, the strongest honest one (docs/benchmarks.md), and the agent.
MODES = ("stateless", "stateless-strong", "stateful")
BASELINES = ("stateless", "stateless-strong")
HEADLINE_BASELINE = "stateless-strong"
MEASURES = (
    "billed_tokens",
    "context_tokens",
    "symmetric_tokens",
    "full_tokens",
    "cache_weighted_tokens",
    "output_tokens",
)
RATIO_MEASURES = MEASURES[:5]
_FIELDS = {  # results.json measure -> TokenTotals field
    "billed_tokens": "billed",
    "context_tokens": "context",
    "symmetric_tokens": "symmetric",
    "full_tokens": "full",
    "cache_weighted_tokens": "cache_weighted",
    "output_tokens": "output",
}


def configure(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser("compare", help="run stateless and stateful side by side and write results")
    add_agent_arguments(parser)
    parser.add_argument("--seeds", type=seeds_arg, default="42,123,456", help="comma-separated seeds")
    parser.add_argument(
        "--modes",
        default=",".join(MODES),
        help="which agents to run, comma-separated: stateless (the paper's baseline), stateless-strong (the"
        " strongest honest one: refusal feedback, compact history lines) and stateful (default: all three;"
        " e.g. only stateful, for a window study)",
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


def _run_of(result: AgentResult) -> Run:
    if result.run is None:
        raise ResearchError(f"run {result.run_id}: the agent did not report the run's final state")
    return result.run


def per_iteration(result: AgentResult) -> list[dict[str, Any]]:
    """One row per experiment: its tokens and calls (from the transcript), best so far, wall seconds."""
    calls = totals_by_iteration(load_transcript(result.transcript))
    run = _run_of(result)
    experiments = result.history
    rows, best, previous = [], None, _seconds(run.created_at)
    for exp in experiments:
        if exp.kept and exp.metric is not None:  # the server's rule decides what is a new best
            best = exp.metric
        finished = _seconds(exp.finished_at or exp.started_at)
        t = calls.get(exp.iteration, TokenTotals())
        rows.append(
            {
                "iteration": exp.iteration,
                **{measure: getattr(t, field) for measure, field in _FIELDS.items()},
                "best_metric": best,
                "wall_s": round(finished - previous, 3),
                "llm_calls": t.calls,
                "latency_s": round(t.latency_s, 3),
            }
        )
        previous = finished
    # Calls after the last experiment (e.g. the model saying DONE) still cost tokens: add them to it.
    extra = [t for i, t in calls.items() if i > len(rows)]
    if rows and extra:
        for t in extra:
            for measure, field in _FIELDS.items():
                rows[-1][measure] = round(rows[-1][measure] + getattr(t, field), 1)
            rows[-1]["llm_calls"] += t.calls
            rows[-1]["latency_s"] = round(rows[-1]["latency_s"] + t.latency_s, 3)
    return rows


def run_record(mode: str, seed: int, result: AgentResult) -> dict[str, Any]:
    rows = per_iteration(result)
    run = _run_of(result)
    wall = _seconds(run.finished_at or run.created_at) - _seconds(run.created_at)
    # Totals come from the whole transcript: calls that recorded no experiment cost tokens too.
    records = load_transcript(result.transcript)
    spent = totals(records)
    record_totals: dict[str, Any] = {m: round(float(getattr(spent, f)), 1) for m, f in _FIELDS.items()}
    record_totals.update(
        cacheable_calls=sum(1 for r in records if r["tokens"].get("cacheable")),
        best_metric=rows[-1]["best_metric"] if rows else None,
        best_low=run.best.low if run.best else None,
        best_high=run.best.high if run.best else None,
        wall_s=round(wall, 2),
        llm_calls=result.llm_calls,
        latency_s=round(spent.latency_s, 2),
        experiments=len(rows),
        refusals=result.refusals,
        billed={
            "source": spent.billed_source,
            "input": spent.billed_input,
            "cached_read": spent.billed_cached_read if spent.provider_calls else None,
            "cache_write": spent.billed_cache_write if spent.provider_calls else None,
            "output": spent.billed_output,
        },
        # What the same requests would cost on each named model, its caching rules applied to both modes.
        cost=run_cost(records),
    )
    return {
        "mode": mode,
        "seed": seed,
        "run_id": result.run_id,
        "from_run": run.from_run,
        "stop_reason": result.stop_reason,
        "stop_detail": result.detail,
        "token_budget": budget_record(result),
        "per_iteration": rows,
        "totals": record_totals,
    }


def budget_record(result: AgentResult) -> dict[str, Any] | None:
    """How close the run came to its token budget (full tokens, as CHECK held them against it)."""
    if result.token_budget is None:
        return None
    spent, budget = result.full_tokens, result.token_budget
    return {"budget": budget, "spent": spent, "percent": round(100 * spent / budget, 1)}


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for mode in MODES:
        mine = [r["totals"] for r in runs if r["mode"] == mode]
        if not mine:
            continue
        keys = [k for k in (*MEASURES, "wall_s", "llm_calls", "latency_s") if all(k in t for t in mine)]
        means = {k: round(statistics.fmean(t[k] for t in mine), 2) for k in keys}
        bests = [t["best_metric"] for t in mine if t["best_metric"] is not None]
        means["best_metric"] = round(statistics.fmean(bests), 4) if bests else None
        calls = sum(t["llm_calls"] for t in mine)
        exps = sum(t["experiments"] for t in mine)
        means["llm_calls_per_experiment"] = round(calls / exps, 3) if exps else None
        if "latency_s" in means and calls:
            means["latency_s_per_call"] = round(sum(t["latency_s"] for t in mine) / calls, 3)
        # Sampling models differ from run to run: every seed's best and the spread, not just the mean.
        means["best_metric_per_seed"] = [t["best_metric"] for t in mine]
        means["best_metric_sd"] = round(statistics.stdev(bests), 4) if len(bests) > 1 else None
        refusals: Counter[str] = Counter()
        for t in mine:
            refusals.update(t.get("refusals", {}))
        means["refusals"] = dict(sorted(refusals.items()))
        means["refused_share_of_calls"] = round(sum(refusals.values()) / calls, 3) if calls else None
        sources = sorted({t["billed"]["source"] for t in mine if "billed" in t})
        if sources:
            means["billed_source"] = sources[0] if len(sources) == 1 else "mixed"
        if all("cost" in t for t in mine):
            models = mine[0]["cost"]
            means["cost_usd"] = {
                m: round(statistics.fmean(t["cost"][m]["usd"] for t in mine), 6) for m in models
            }
        if not any(t.get("cacheable_calls") for t in mine):
            means["cache_weighted_note"] = (
                "equals full: the fixed prefix is below the provider's minimum cacheable length, "
                "so nothing would be cached"
            )
        summary[mode] = means
    for baseline in BASELINES:
        if baseline not in summary or "stateful" not in summary:
            continue
        suffix = "" if baseline == "stateless" else "_strong"
        ratios, note = _ratios(runs, summary, baseline)
        summary[f"ratio{suffix}"] = ratios
        if note:
            summary[f"ratio{suffix}_note"] = note
        elif "cost_usd" in summary[baseline] and "cost_usd" in summary["stateful"]:
            summary.setdefault("cost_ratio", {})[baseline] = {
                m: round(usd / summary["stateful"]["cost_usd"][m], 2)
                if summary["stateful"]["cost_usd"][m]
                else None
                for m, usd in summary[baseline]["cost_usd"].items()
            }
        if not note and baseline == "stateless":
            # Per iteration, like the ratios: only where both modes ran the same iterations.
            summary["full_tokens_crossover_iteration"] = crossover(runs)
    headline = HEADLINE_BASELINE if "ratio_strong" in summary else "stateless"
    if f"ratio{'_strong' if headline != 'stateless' else ''}" in summary:
        summary["headline"] = {
            "baseline": headline,
            "measure": "billed_tokens",
            "billed_source": summary["stateful"].get("billed_source"),
        }
    return summary


def _ratios(
    runs: list[dict[str, Any]], summary: dict[str, Any], baseline: str
) -> tuple[dict[str, float | None], str | None]:
    """`baseline` / stateful for each token measure; none when the two recorded different numbers of
    experiments (tokens per run mean nothing side by side when one mode did less of the work)."""
    counts = {
        m: sorted(r["totals"]["experiments"] for r in runs if r["mode"] == m) for m in (baseline, "stateful")
    }
    if counts[baseline] != counts["stateful"]:
        return {}, (
            f"no ratio: the modes recorded different numbers of experiments ({baseline} "
            f"{counts[baseline]}, stateful {counts['stateful']} per seed)"
        )
    a, b = summary[baseline], summary["stateful"]
    return {m: round(a[m] / b[m], 2) if b.get(m) else None for m in RATIO_MEASURES if m in a and m in b}, None


def crossover(runs: list[dict[str, Any]], baseline: str = "stateless") -> int | None:
    """The first iteration from which stateful's cumulative full tokens stay below the baseline's."""

    def mean_cumulative(mode: str) -> list[float]:
        series = [[row["full_tokens"] for row in r["per_iteration"]] for r in runs if r["mode"] == mode]
        length = min(len(s) for s in series)
        out, total = [], 0.0
        for i in range(length):
            total += statistics.fmean(s[i] for s in series)
            out.append(total)
        return out

    stateless, stateful = mean_cumulative(baseline), mean_cumulative("stateful")
    first = None
    for i, (cost_stateless, cost_stateful) in enumerate(zip(stateless, stateful, strict=False), start=1):
        if cost_stateful >= cost_stateless:
            first = None
        elif first is None:
            first = i
    return first


async def latest_run(args: argparse.Namespace) -> str:
    """The newest run of the task on the server compare uses (--server-url, or DIR/runs.db)."""
    async with connect(
        server_url=args.server_url, token=args.token, db=args.db, data=args.data, server_args=spawn_args(args)
    ) as rc:
        runs = [run for run in await rc.runs() if run.task == args.task]
    if not runs:
        where = args.server_url or args.db
        raise ResearchError(
            f"--from-run latest: no {args.task} run on {where} to start from", kind="unknown_run"
        )
    return runs[0].id


async def session(args: argparse.Namespace, out: Path, mode: str, seed: int) -> AgentResult:
    """One run of the compare: `mode` on `seed`, its transcript under `out`."""
    return await run_session(
        args,
        mode=mode,
        seed=seed,
        transcript=out / "transcripts" / f"{mode}-{seed}.jsonl",
        name=f"compare {mode} seed {seed}",
    )


async def compare(args: argparse.Namespace, seeds: list[int], progress: Progress) -> dict[str, Any]:
    out: Path = args.out
    if not args.server_url:
        args.db = out / "runs.db"
    modes = [m for m in MODES if m in args.modes.split(",")]
    if args.parallel and args.hpo_threads is None and not args.server_url:
        # Share the cores between the modes' trainings: XGBoost thread teams that outnumber the cores
        # spin-wait for each other, and every experiment runs several times slower.
        args.hpo_threads = max(1, (os.cpu_count() or 1) // len(modes))
    if args.from_run == "latest":
        # Once, before this compare adds runs: every run of it starts from the same earlier run.
        args.from_run = await latest_run(args)
    task_bar = progress.add_task("compare", total=len(seeds) * len(modes))
    runs = []
    for seed in seeds:
        progress.update(
            task_bar, description=f"seed {seed}: {' + '.join(modes) if args.parallel else 'running'}"
        )
        if args.parallel:
            results = await asyncio.gather(*(session(args, out, mode, seed) for mode in modes))
        else:
            # One at a time, each made when its turn comes: a first run that fails (an unreachable
            # model) leaves no coroutine behind never awaited, which Python reports on exit.
            results = []
            for mode in modes:
                results.append(await session(args, out, mode, seed))
                progress.advance(task_bar)
        if args.parallel:
            progress.advance(task_bar, len(modes))
        runs += [run_record(mode, seed, result) for mode, result in zip(modes, results, strict=True)]
    llm = results[0]
    return {
        "task": args.task,
        "llm": args.llm if not llm.scripted else f"{args.llm} (deterministic test double, no language model)",
        "model": args.model,
        # The same for both modes: only the context strategy differs.
        "sampling": {
            "temperature": args.temperature,
            "max_tokens": args.max_tokens,
            "tool_choice": args.tool_choice,
            "tool_results_as_text": args.tool_results_as_text,
        },
        "code_replies": args.code_replies,
        "max_failures": args.max_failures,
        "window": "auto (messages since the last experiment)"
        if args.window is None
        else f"{args.window} messages",
        "iterations": args.iterations,
        "token_budget": args.token_budget,
        "from_run": args.from_run,
        "seeds": seeds,
        "parallel": args.parallel,
        "hpo_threads": args.hpo_threads,
        "runs": runs,
        "summary": summarise(runs),
    }


def pack_transcripts(folder: Path) -> None:
    """A gzipped copy beside each transcript, committed with the results so every figure can be recounted."""
    for transcript in sorted(folder.glob("*.jsonl")):
        with (
            transcript.open("rb") as raw,
            open(f"{transcript}.gz", "wb") as out,
            gzip.GzipFile(fileobj=out, mode="wb", mtime=0) as packed,  # same bytes for the same run
        ):
            shutil.copyfileobj(raw, packed)


def main(args: argparse.Namespace) -> int:
    check_agent_args(args)
    unknown = set(args.modes.split(",")) - set(MODES)
    if unknown or not args.modes.strip():
        raise ResearchError(
            f"--modes takes stateless, stateful or both (comma-separated), not {args.modes!r}"
        )
    console = Console()
    seeds: list[int] = args.seeds
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
    pack_transcripts(args.out / "transcripts")
    write_table(results, args.out / "table.md")
    write_figure(results, args.out / "figure.png")
    console.print((args.out / "table.md").read_text(), markup=False)  # run names and reasons are text
    if results["llm"].startswith("scripted"):
        console.print(f"[yellow]{SCRIPTED_NOTE}[/]")
    out = args.out.resolve()
    runs = f"the runs on {args.server_url}" if args.server_url else f"the runs in {Path(args.db).resolve()}"
    console.print(
        f"written to {out}: results.json, table.md, figure.png, transcripts/ (gzipped JSONL); {runs}",
        markup=False,
        soft_wrap=True,  # paths stay whole, to be copied
    )
    return 0
