"""`autoresearch-mcp run`: one autonomous run, stateful (default) or the stateless baseline.

Its flags are in agent_args.py (shared with compare); what it says when Ctrl-C stops it, in
interrupted.py; the live view and the final lines, in live.py.
"""

import argparse
import asyncio
import functools
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.live import Live

from autoresearch_mcp.client.agent_args import (
    add_agent_arguments,
    batch_arg,
    batch_problem,
    check_agent_args,
    seed_arg,
)
from autoresearch_mcp.client.check import AgentConfig, AgentResult
from autoresearch_mcp.client.connect import ResearchClient, connect, tool_arguments
from autoresearch_mcp.client.interrupted import PROG, RunHandle, interrupted_line
from autoresearch_mcp.client.live import LiveView, ObservedClient, final_panel, result_lines
from autoresearch_mcp.client.llm.base import LLM, LLMError, make_llm
from autoresearch_mcp.client.llm.scripted import ScriptedLLM
from autoresearch_mcp.client.meter import Transcript
from autoresearch_mcp.client.profiles import pick_profile
from autoresearch_mcp.client.stateful import StatefulAgent
from autoresearch_mcp.client.stateless import StatelessAgent
from autoresearch_mcp.contract.arguments import GetExperimentHistoryArgs, RunExperimentArgs, StartRunArgs
from autoresearch_mcp.contract.display import say
from autoresearch_mcp.contract.errors import ResearchError
from autoresearch_mcp.contract.models import Run, ScriptedPlan, StartedRun, TaskInfo


def configure(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser("run", help="run one autonomous experiment session (or resume one with --run-id)")
    add_agent_arguments(parser)
    parser.add_argument(
        "--mode",
        choices=["stateful", "stateless", "stateless-strong"],
        default="stateful",
        help="stateful: the agent sends a bounded summary; stateless: the paper's baseline, which resends the"
        " history; stateless-strong: the strongest honest baseline (refusal feedback, compact history lines)",
    )
    parser.add_argument(
        "--seed", type=seed_arg, default=42, help="the run's seed (and the scripted double's)"
    )
    parser.add_argument("--name", help="a name for the run (default: task, mode, backend and start time)")
    parser.add_argument(
        "--run-id", help="resume this running run instead of starting one (its task and budget apply)"
    )
    parser.add_argument(
        "--suggest",
        choices=["tpe"],
        help="params work, stateful: the summary also shows the configuration an optimiser would try next"
        " (tpe: Optuna's TPE fed the run's history), for the model to take, change or ignore; the"
        " transcript records which (default: none)",
    )
    parser.add_argument(
        "--batch",
        type=batch_arg,
        default=1,
        metavar="K",
        help="params work, stateful: the model may propose up to K experiments in one reply (a JSON list,"
        " or several run_experiment calls), submitted as background jobs that the server's --workers"
        " measure at once; each is judged alone (budget, refusals, repeats) (default 1)",
    )
    parser.add_argument("--transcript", type=Path, help="JSONL transcript (default: data dir/transcripts/)")
    parser.add_argument("--quiet", action="store_true", help="no live display, only the final lines")
    parser.set_defaults(func=functools.partial(main, parser=parser))


def build_llm(
    args: argparse.Namespace,
    seed: int,
    task: TaskInfo | None = None,
    original: str = "",
    plan: ScriptedPlan | None = None,
) -> LLM:
    """The backend `args` name; the scripted double also gets the task as the server describes it, and
    the server's plan for the double."""
    return make_llm(
        args.llm,
        model=args.model,
        max_tokens=args.max_tokens,
        base_url=args.base_url,
        seed=seed,
        task=task,
        plan=plan,
        original=original,
        prompt_caching=args.prompt_caching,
        tool_choice=args.tool_choice,
        timeout=args.llm_timeout,
        temperature=args.temperature,
        tool_results_as_text=args.tool_results_as_text,
    )


def spawn_args(args: argparse.Namespace) -> list[str]:
    """Extra flags for a spawned server: its XGBoost threads and job workers, the task folder given as
    --task PATH."""
    threads = getattr(args, "hpo_threads", None)
    extra = [] if threads is None else ["--hpo-threads", str(threads)]
    if (workers := getattr(args, "workers", None)) is not None:
        extra += ["--workers", str(workers)] + (["--force"] if getattr(args, "force", False) else [])
    for folder in getattr(args, "task_dirs", None) or []:
        extra += ["--task-dir", folder]
    return extra


def run_name(args: argparse.Namespace, mode: str) -> str:
    """Tells runs apart in `runs` and the dashboard: task, mode, backend, start time."""
    backend = args.llm if not args.model else f"{args.llm}:{args.model}"
    return f"{args.task} {mode} {backend} {datetime.now(UTC):%Y-%m-%d %H:%M} UTC"[:100]


async def known_task(rc: ResearchClient, name: str) -> TaskInfo:
    """The task, or one line naming the known ones (before start_run, which would refuse with a dump)."""
    tasks = await rc.tasks()
    for task in tasks:
        if task.name == name:
            return task
    known = ", ".join(sorted(t.name for t in tasks))
    raise ResearchError(f"unknown task {name!r}: known tasks are {known}", kind="unknown_task")


async def resumable(rc: ResearchClient, args: argparse.Namespace) -> tuple[Run, TaskInfo]:
    """The run `--run-id` names and its task, or one line saying what to add or do instead."""
    run = await rc.run(args.run_id)
    if run.status != "running":
        raise ResearchError(
            f"run {run.id} is {run.status}: it takes no more experiments; start a new run without --run-id",
            kind="run_finished",
        )
    folders = getattr(args, "task_dirs", None) or []
    if folders and args.task != run.task:
        raise ResearchError(
            f"run {run.id} works on task {run.task!r}, but --task {folders[-1]} is the folder of task "
            f"{args.task!r}: give the folder of {run.task!r}",
            kind="unknown_task",
        )
    tasks = {task.name: task for task in await rc.tasks()}
    if run.task not in tasks:
        raise ResearchError(
            f"run {run.id} works on task {run.task!r}, which this server does not know: a task folder is "
            f"named again to resume a run on it, add --task PATH (the folder with {run.task}'s "
            "autoresearch.toml)",
            kind="unknown_task",
        )
    return run, tasks[run.task]


async def run_session(
    args: argparse.Namespace,
    *,
    mode: str,
    seed: int,
    transcript: Path | None = None,
    name: str | None = None,
    progress: Any = None,
    handle: RunHandle | None = None,
) -> AgentResult:
    """Start a run on the server (or take up `args.run_id`) and drive it with one agent until CHECK
    stops it. `progress` is called after every LLM call; a `LiveView` also sees every tool call;
    `handle` learns the run as soon as there is one (for what Ctrl-C says)."""
    # A real backend is set up before anything connects, so a bad setting leaves no run (and no
    # database) behind; the scripted double needs the task as the server describes it first.
    scripted = args.llm.startswith("scripted")
    llm: LLM | None = None if scripted else build_llm(args, seed)
    if llm is not None:
        await preflight(llm)
    resume: str | None = getattr(args, "run_id", None)
    try:
        async with connect(
            server_url=args.server_url,
            token=args.token,
            db=args.db,
            data=args.data,
            server_args=spawn_args(args),
        ) as rc:
            if resume:
                run, task = await resumable(rc, args)
                description = task.description
            else:
                task = await known_task(rc, args.task)
            if getattr(args, "suggest", None) and task.kind != "params":
                raise ResearchError(
                    f"--suggest is for params work: task {task.name} is code work, with no params for an "
                    "optimiser to suggest; run it without --suggest"
                )
            batch = getattr(args, "batch", 1)
            if batch > 1 and task.kind != "params":
                raise ResearchError(
                    f"--batch is for params work: task {task.name} is code work, where each change builds"
                    " on the version before it; run it without --batch"
                )
            # The double is checked before a run is started for it: one it cannot play starts none.
            plan = await rc.scripted_plan(task.name) if scripted else None
            if plan is not None and (problem := ScriptedLLM.cannot_play(task, plan)) is not None:
                raise LLMError(problem)
            if not resume:
                arguments = {
                    "task": args.task,
                    "budget": args.iterations,
                    "target": args.target,
                    "seed": seed,
                    "name": name or run_name(args, mode),
                    # Who proposes the experiments, kept with the run: every output of a run that the
                    # scripted double drove says so, whatever the run is named.
                    "llm": args.llm if llm is None else llm.name,
                }
                # Only when asked: a server from before these arguments still starts runs.
                if args.from_run:
                    arguments["from_run"] = args.from_run
                if getattr(args, "reeval_seeds", 0):
                    arguments["reeval_seeds"] = args.reeval_seeds
                if getattr(args, "suggest", None):
                    arguments["suggest"] = args.suggest
                started = await start(rc, arguments, args)
                run = await rc.run(started.run_id)
                description = started.task_description
            page = await rc.result(GetExperimentHistoryArgs(run_id=run.id, last=1))
            last_iteration = max((e.iteration for e in page.experiments), default=0)
            if handle is not None:
                handle.run_id, handle.seen = run.id, last_iteration
            if isinstance(progress, LiveView):
                progress.started(run, last_iteration)
                rc = ObservedClient(rc, progress)
            # Budget 1 is the model's: it is asked at least once.
            fresh = not resume and not args.from_run and run.used == 0 and run.budget >= 2
            if fresh and task.kind == "params" and args.first == "defaults":
                run = await defaults_first(rc, run.id)
            if llm is None:
                llm = build_llm(args, seed, task, await rc.train_py(run.id), plan)
            config = AgentConfig(
                task=task,
                iterations=max(1, run.budget - run.used),
                max_failures=args.max_failures,
                done_from=args.done_from,
                window=args.window,
                max_tokens=args.max_tokens,
                code_replies=args.code_replies,
                param_replies=args.param_replies,
                token_budget=args.token_budget,
                context_window=args.context_window,
                batch=getattr(args, "batch", 1),
                profile=pick_profile(getattr(args, "profile", "auto"), args.llm, args.base_url, args.model),
            )
            recorder = Transcript(
                run.id, mode, llm=llm, path=transcript, token_budget=config.token_budget, batch=config.batch
            )
            if mode == "stateful":
                agent: StatefulAgent | StatelessAgent = StatefulAgent(rc, recorder, run.id, config, progress)
            else:
                strong = mode == "stateless-strong"
                agent = StatelessAgent(rc, recorder, run.id, config, description, progress, strong=strong)
            result = await agent.run()
            result.token_budget = config.token_budget
            # What the run looks like on the server at the end, read through the same door.
            result.run = await rc.run(run.id)
            result.history = await rc.history(run.id)
            return result
    finally:
        if llm is not None:
            await llm.aclose()


async def defaults_first(rc: ResearchClient, run_id: str) -> Run:
    """Record the task's defaults as the run's first experiment, before any model is asked: the
    baseline every later proposal is measured against, in every mode alike. Asked to start, a model may
    invent a whole configuration instead of the defaults, and its run then searches around that guess;
    measured first, the defaults make every mode start from the same place. A refusal is left to the agent:
    the model is asked then, as with `--first model`. Only a new run with a budget of 2 or more gets it
    (run_session): a budget of 1 is the model's."""
    await rc.call(RunExperimentArgs(params={}, run_id=run_id, note="the defaults (--first defaults)"))
    return await rc.run(run_id)


async def start(rc: ResearchClient, arguments: dict[str, Any], args: argparse.Namespace) -> StartedRun:
    """start_run; a server without what the task needs says so to the operator, who is here."""
    try:
        return await rc.result(tool_arguments(StartRunArgs, arguments))
    except ResearchError as exc:
        operator = exc.detail.get("operator") if exc.kind == "unavailable" else None
        if not isinstance(operator, str):
            raise
        given = f" (this command gave the server --data {args.data})" if args.data else ""
        raise ResearchError(f"start_run refused: {operator}{given}", kind=exc.kind) from None


async def preflight(llm: LLM) -> None:
    """A backend that can check its endpoint does so once, before a run is started for nothing."""
    check = getattr(llm, "preflight", None)
    if check is not None:
        try:
            await check()
        except LLMError:
            await llm.aclose()
            raise


def main(args: argparse.Namespace, parser: argparse.ArgumentParser | None = None) -> int:
    check_agent_args(args)
    if args.suggest and args.mode != "stateful":
        raise ResearchError(
            f"--suggest puts its line in the summary the stateful agent reads; --mode {args.mode} does not"
            " read it: drop --suggest or use --mode stateful"
        )
    if (problem := batch_problem(args.batch, args.mode)) is not None:
        raise ResearchError(problem)
    console = Console(highlight=False)
    plain = not console.is_terminal
    # A terminal's lines wrap between words (rich's), never inside an id or a value (the terminal's);
    # a pipe's are never wrapped.
    console.soft_wrap = plain
    llm = args.llm if args.llm == "scripted" else args.model or args.llm
    view = LiveView(
        args.mode, llm, plain=plain, token_budget=args.token_budget, console=None if plain else console
    )
    handle = RunHandle()
    session = run_session(
        args,
        mode=args.mode,
        seed=args.seed,
        transcript=args.transcript,
        name=args.name,
        progress=None if args.quiet else view,
        handle=handle,
    )
    try:
        if args.quiet or plain:
            result = asyncio.run(session)
        else:
            with Live(view, console=console, refresh_per_second=4, transient=True):
                result = asyncio.run(session)
    except LLMError as exc:
        raise ResearchError(str(exc)) from None
    except KeyboardInterrupt:  # the session has closed its server; say what became of the run
        say(f"{PROG}: {interrupted_line(args, handle, parser)}")
        return 130
    if not (args.quiet or plain):
        console.print(final_panel(view, result))
    for line in result_lines(result, args):
        console.print(line, markup=False)
    # A run that measured nothing is a failure a script calling this must see (the lines say why).
    failed = result.stop_reason == "llm-error" or result.run is None or result.run.best is None
    return 1 if failed else 0
