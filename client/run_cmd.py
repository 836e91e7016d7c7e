"""`autoresearch-mcp run`: one autonomous run, stateful (default) or the stateless baseline."""

import argparse
import asyncio
import math
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.live import Live

from autoresearch_mcp.client.check import AgentConfig, AgentResult
from autoresearch_mcp.client.connect import ResearchClient, connect
from autoresearch_mcp.client.live import SCRIPTED_NOTE as SCRIPTED_NOTE  # compare's import
from autoresearch_mcp.client.live import LiveView, ObservedClient, final_panel, result_lines
from autoresearch_mcp.client.llm.base import LLM, LLMError, make_llm, temperature_problem
from autoresearch_mcp.client.meter import Transcript
from autoresearch_mcp.client.stateful import StatefulAgent
from autoresearch_mcp.client.stateless import StatelessAgent
from autoresearch_mcp.client.task_folder import resolve_task_folder
from autoresearch_mcp.contract.env import ENV_TOKEN, add_location_arguments
from autoresearch_mcp.contract.errors import ResearchError
from autoresearch_mcp.contract.models import Run, StartedRun, TaskInfo


def window_arg(value: str) -> int | None:
    if value == "auto":
        return None
    number = int(value)
    if number < 0:
        raise argparse.ArgumentTypeError("--window is 'auto' or a number of messages >= 0")
    return number


MAX_THREADS = 256  # ServerSettings.hpo_threads' bound


def positive_int(value: str) -> int:
    if not value.isdigit() or not 1 <= int(value) <= MAX_THREADS:
        raise argparse.ArgumentTypeError(f"expected a whole number from 1 to {MAX_THREADS}, not {value!r}")
    return int(value)


def check_agent_args(args: argparse.Namespace) -> None:
    """Refuse flag combinations that would be ignored or fail later, before any run starts; a task
    folder given as --task PATH becomes its task name (the spawned server registers the folder)."""
    resolve_task_folder(args)
    if (problem := temperature_problem(args.llm, args.temperature)) is not None:
        raise ResearchError(problem)
    if getattr(args, "run_id", None) and args.from_run:
        raise ResearchError(
            "--run-id resumes a run and --from-run starts a new one from an earlier run: give one of them"
        )
    if args.hpo_threads is not None and args.server_url:
        raise ResearchError(
            "--hpo-threads configures a server this command spawns; with --server-url, start that server"
            " with `autoresearch-mcp serve --hpo-threads N` instead"
        )


def target_arg(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not math.isfinite(number):
        raise argparse.ArgumentTypeError(f"--target is a finite number, not {value!r}")
    return number


def temperature_arg(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        number = -1.0
    if not 0.0 <= number <= 2.0:
        raise argparse.ArgumentTypeError(f"--temperature is a number from 0 to 2, not {value!r}")
    return number


MAX_BUDGET = 10_000  # start_run's bound


def budget_arg(value: str) -> int:
    if not value.isdigit() or not 1 <= int(value) <= MAX_BUDGET:
        raise argparse.ArgumentTypeError(
            f"the budget is a whole number of experiments from 1 to {MAX_BUDGET}, not {value!r}"
        )
    return int(value)


MAX_REEVAL_SEEDS = 10  # start_run's bound


def reeval_arg(value: str) -> int:
    if not value.isdigit() or not 0 <= int(value) <= MAX_REEVAL_SEEDS:
        raise argparse.ArgumentTypeError(
            f"--reeval-seeds is a whole number from 0 to {MAX_REEVAL_SEEDS}, not {value!r}"
        )
    return int(value)


def token_budget_arg(value: str) -> int:
    number = int(value) if value.isascii() and value.isdigit() else 0
    if number < 1:
        raise argparse.ArgumentTypeError(
            f"the token budget is a whole number of tokens, 1 or more, not {value!r}"
        )
    return number


LLM_HELP = (
    "who proposes the experiments: anthropic = the paid Anthropic API (the default; needs"
    " ANTHROPIC_API_KEY), openai = any OpenAI-compatible endpoint (a local server needs only --base-url;"
    " api.openai.com needs OPENAI_API_KEY), scripted = an offline test double, no language model,"
    " scripted-sloppy = the same double with a small model's habits (copies, repeats, flat params)"
)


def add_agent_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags shared by `run` and `compare`."""
    add_location_arguments(parser)
    parser.add_argument(
        "--task",
        default="hpo-covertype",
        help="the task: hpo-covertype, codeopt-records (`tasks` lists them), or the path of a task folder"
        " (your script + autoresearch.toml, docs/tasks.md)",
    )
    parser.add_argument(
        "--llm",
        choices=["anthropic", "openai", "scripted", "scripted-sloppy"],
        default="anthropic",
        help=LLM_HELP,
    )
    parser.add_argument(
        "--model", help="model name (default: claude-haiku-4-5; openai: the endpoint's first model)"
    )
    parser.add_argument("--max-tokens", type=int, default=1024, help="max output tokens per LLM call")
    parser.add_argument(
        "--base-url",
        help="LLM endpoint, e.g. http://127.0.0.1:8080/v1 (default: OPENAI_BASE_URL / ANTHROPIC_BASE_URL, else the provider's)",
    )
    parser.add_argument(
        "--prompt-caching", action="store_true", help="anthropic: cache system prompt and tools"
    )
    parser.add_argument(
        "--llm-timeout",
        type=float,
        default=120.0,
        help="seconds one LLM call may take (raise for slow local models)",
    )
    parser.add_argument(
        "--tool-choice",
        default="auto",
        help="openai: 'auto', or a tool name to force every turn (helps small local models)",
    )
    parser.add_argument(
        "--tool-results-as-text",
        action="store_true",
        help="openai: send tool results as user text, for servers whose chat template drops tool messages",
    )
    parser.add_argument(
        "--code-replies",
        choices=("tool", "text"),
        default="tool",
        help="stateful, code tasks: the model edits train.py with a modify_train_py call (tool), or "
        "answers with the whole file in a python block that the agent sends as that call (text: for "
        "small local models, which cannot write code inside a JSON string)",
    )
    parser.add_argument(
        "--temperature",
        type=temperature_arg,
        help="openai: sampling temperature, 0 to 2 (default: the server's)",
    )
    parser.add_argument(
        "--budget",
        "--iterations",
        dest="iterations",
        type=budget_arg,
        default=15,
        metavar="N",
        help="experiments the run may record, as start_run's budget (--iterations is the same flag)",
    )
    parser.add_argument(
        "--token-budget",
        type=token_budget_arg,
        metavar="N",
        help="full tokens (everything sent plus the replies, over every LLM call) the run may spend;"
        " it stops before a call that could exceed them (compare: each run's own cap; default: no cap)",
    )
    parser.add_argument(
        "--target", type=target_arg, help="the run converges (and stops) when the metric reaches this"
    )
    parser.add_argument(
        "--reeval-seeds",
        type=reeval_arg,
        default=0,
        metavar="K",
        help="re-run a would-be new best on K more seeds (each costs budget) and keep it only if the mean"
        " of the K+1 metrics beats the best's mean (default 0: off)",
    )
    parser.add_argument(
        "--window",
        type=window_arg,
        default=None,
        help="stateful window: 'auto' (default: messages since the last experiment) or N messages (paper: 20)",
    )
    parser.add_argument(
        "--max-failures",
        type=int,
        default=5,
        help="stop after this many calls in a row without a good experiment (refusals, crashes, reverts)",
    )
    parser.add_argument(
        "--from-run",
        metavar="ID|latest",
        help="start from an earlier run of the task (its id, or latest): its best is re-measured as"
        " experiment #1 (one unit of budget) and the summary shows its best, notes and failed approaches",
    )
    parser.add_argument("--server-url", help="use a running HTTP server instead of spawning one over stdio")
    parser.add_argument(
        "--hpo-threads",
        type=positive_int,
        help="threads per XGBoost training in the spawned server (default: every core; compare --parallel"
        " splits them between the modes)",
    )
    parser.add_argument(
        "--token",
        default=os.environ.get(ENV_TOKEN),
        help=f"bearer token for --server-url (default ${ENV_TOKEN})",
    )


def configure(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser("run", help="run one autonomous experiment session (or resume one with --run-id)")
    add_agent_arguments(parser)
    parser.add_argument(
        "--mode",
        choices=["stateful", "stateless"],
        default="stateful",
        help="stateful: the agent sends a bounded summary; stateless: the baseline that resends the history",
    )
    parser.add_argument("--seed", type=int, default=42, help="the run's seed (and the scripted double's)")
    parser.add_argument("--name", help="a name for the run (default: task, mode, backend and start time)")
    parser.add_argument(
        "--run-id", help="resume this running run instead of starting one (its task and budget apply)"
    )
    parser.add_argument("--transcript", type=Path, help="JSONL transcript (default: data dir/transcripts/)")
    parser.add_argument("--quiet", action="store_true", help="no live display, only the final lines")
    parser.set_defaults(func=main)


def build_llm(args: argparse.Namespace, seed: int, task: TaskInfo | None = None, original: str = "") -> LLM:
    """The backend `args` name; the scripted double also gets the task as the server describes it."""
    return make_llm(
        args.llm,
        model=args.model,
        max_tokens=args.max_tokens,
        base_url=args.base_url,
        seed=seed,
        task=task,
        original=original,
        prompt_caching=args.prompt_caching,
        tool_choice=args.tool_choice,
        timeout=args.llm_timeout,
        temperature=args.temperature,
        tool_results_as_text=args.tool_results_as_text,
    )


def spawn_args(args: argparse.Namespace) -> list[str]:
    """Extra flags for a spawned server: its XGBoost threads, the task folder given as --task PATH."""
    threads = getattr(args, "hpo_threads", None)
    extra = [] if threads is None else ["--hpo-threads", str(threads)]
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


async def resumable(rc: ResearchClient, run_id: str) -> Run:
    run = await rc.run(run_id)
    if run.status != "running":
        raise ResearchError(
            f"run {run_id} is {run.status}: it takes no more experiments; start a new run without --run-id",
            kind="run_finished",
        )
    return run


async def run_session(
    args: argparse.Namespace,
    *,
    mode: str,
    seed: int,
    transcript: Path | None = None,
    name: str | None = None,
    progress: Any = None,
) -> AgentResult:
    """Start a run on the server (or take up `args.run_id`) and drive it with one agent until CHECK
    stops it. `progress` is called after every LLM call; a `LiveView` also sees every tool call."""
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
                run = await resumable(rc, resume)
                task = await rc.task(run.task)
                description = task.description
            else:
                task = await known_task(rc, args.task)
                arguments = {
                    "task": args.task,
                    "budget": args.iterations,
                    "target": args.target,
                    "seed": seed,
                    "name": name or run_name(args, mode),
                }
                # Only when asked: a server from before these arguments still starts runs.
                if args.from_run:
                    arguments["from_run"] = args.from_run
                if getattr(args, "reeval_seeds", 0):
                    arguments["reeval_seeds"] = args.reeval_seeds
                started = await rc.typed("start_run", arguments, StartedRun)
                run = await rc.run(started.run_id)
                description = started.task_description
            if isinstance(progress, LiveView):
                progress.started(run)
                rc = ObservedClient(rc, progress)
            if llm is None:
                llm = build_llm(args, seed, task, await rc.train_py(run.id))
            config = AgentConfig(
                task=task,
                iterations=max(1, run.budget - run.used),
                max_failures=args.max_failures,
                window=args.window,
                max_tokens=args.max_tokens,
                code_replies=args.code_replies,
                token_budget=args.token_budget,
            )
            recorder = Transcript(run.id, mode, llm=llm, path=transcript, token_budget=config.token_budget)
            if mode == "stateful":
                agent: StatefulAgent | StatelessAgent = StatefulAgent(rc, recorder, run.id, config, progress)
            else:
                agent = StatelessAgent(rc, recorder, run.id, config, description, progress)
            result = await agent.run()
            result.token_budget = config.token_budget
            # What the run looks like on the server at the end, read through the same door.
            result.run = await rc.run(run.id)
            result.history = await rc.history(run.id)
            return result
    finally:
        if llm is not None:
            await llm.aclose()


async def preflight(llm: LLM) -> None:
    """A backend that can check its endpoint does so once, before a run is started for nothing."""
    check = getattr(llm, "preflight", None)
    if check is not None:
        try:
            await check()
        except LLMError:
            await llm.aclose()
            raise


def main(args: argparse.Namespace) -> int:
    check_agent_args(args)
    console = Console(soft_wrap=True, highlight=False)
    plain = not console.is_terminal
    llm = args.llm if args.llm == "scripted" else args.model or args.llm
    view = LiveView(args.mode, llm, plain=plain, token_budget=args.token_budget)
    session = run_session(
        args,
        mode=args.mode,
        seed=args.seed,
        transcript=args.transcript,
        name=args.name,
        progress=None if args.quiet else view,
    )
    try:
        if args.quiet or plain:
            result = asyncio.run(session)
        else:
            with Live(view, console=console, refresh_per_second=4, transient=True):
                result = asyncio.run(session)
    except LLMError as exc:
        raise ResearchError(str(exc)) from None
    if not (args.quiet or plain):
        console.print(final_panel(view, result))
    for line in result_lines(result, args):
        console.print(line, markup=False)
    return 0 if result.stop_reason != "llm-error" else 1
