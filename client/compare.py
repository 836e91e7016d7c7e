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
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from autoresearch_mcp.client.agent_args import add_agent_arguments, check_agent_args, seeds_arg
from autoresearch_mcp.client.check import AgentResult
from autoresearch_mcp.client.compare_results import MODES, run_record, summarise
from autoresearch_mcp.client.connect import connect
from autoresearch_mcp.client.live import SCRIPTED_NOTE
from autoresearch_mcp.client.llm.base import LLMError
from autoresearch_mcp.client.report_figure import write_figure, write_table
from autoresearch_mcp.client.run_cmd import run_session, spawn_args
from autoresearch_mcp.contract.errors import ResearchError


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
    parser.add_argument(
        "--suggest",
        choices=["tpe"],
        help="with --modes stateful: each run's summary also shows the configuration an optimiser would try"
        " next, as `run --suggest` does; the transcripts record whether the model took it",
    )
    parser.set_defaults(func=main)


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
    """One run of the compare: `mode` on `seed`, its transcript under `out`. A compare into the folder
    of an earlier one (as `--from-run` does, for its runs.db) replaces that mode and seed's transcript:
    a run appends to its transcript, and two runs in one file would mix two studies' figures."""
    transcript = out / "transcripts" / f"{mode}-{seed}.jsonl"
    transcript.unlink(missing_ok=True)
    Path(f"{transcript}.gz").unlink(missing_ok=True)
    return await run_session(
        args,
        mode=mode,
        seed=seed,
        transcript=transcript,
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
        "param_replies": args.param_replies,
        "first": args.first,
        "suggest": args.suggest,
        "max_failures": args.max_failures,
        "done_from": args.done_from,
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
    if args.suggest and set(args.modes.split(",")) != {"stateful"}:
        raise ResearchError(
            "--suggest puts its line in the summary only the stateful agent reads: add --modes stateful"
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
