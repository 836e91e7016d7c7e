"""`autoresearch-mcp run`: one autonomous run, stateful (default) or the stateless baseline."""

import argparse
import asyncio
import os
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from autoresearch_mcp.client.check import AgentConfig, AgentResult
from autoresearch_mcp.client.connect import connect
from autoresearch_mcp.client.llm.base import LLM, LLMError, make_llm, temperature_problem
from autoresearch_mcp.client.meter import Transcript
from autoresearch_mcp.client.stateful import StatefulAgent
from autoresearch_mcp.client.stateless import StatelessAgent
from autoresearch_mcp.contract.env import ENV_TOKEN, add_location_arguments
from autoresearch_mcp.contract.errors import ResearchError
from autoresearch_mcp.contract.models import Run, StartedRun, TaskInfo
from autoresearch_mcp.contract.transcript import load_transcript, totals

SCRIPTED_NOTE = "scripted backend: a deterministic test double, no language model was used"


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
    """Refuse flag combinations that would be ignored or fail later, before any run starts."""
    if (problem := temperature_problem(args.llm, args.temperature)) is not None:
        raise ResearchError(problem)
    if args.hpo_threads is not None and args.server_url:
        raise ResearchError(
            "--hpo-threads configures a server this command spawns; with --server-url, start that server"
            " with `autoresearch-mcp serve --hpo-threads N` instead"
        )


def temperature_arg(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        number = -1.0
    if not 0.0 <= number <= 2.0:
        raise argparse.ArgumentTypeError(f"--temperature is a number from 0 to 2, not {value!r}")
    return number


def add_agent_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags shared by `run` and `compare`."""
    add_location_arguments(parser)
    parser.add_argument("--task", default="hpo-covertype", help="hpo-covertype or codeopt-records")
    parser.add_argument(
        "--llm",
        choices=["anthropic", "openai", "scripted", "scripted-sloppy"],
        default="anthropic",
        help="anthropic (default, the paid API), openai (any OpenAI-compatible endpoint), scripted (a "
        "deterministic test double, no model), scripted-sloppy (the double with a small model's habits)",
    )
    parser.add_argument("--model", help="model name (anthropic default: claude-haiku-4-5)")
    parser.add_argument("--max-tokens", type=int, default=1024, help="max output tokens per LLM call")
    parser.add_argument("--base-url", help="LLM endpoint (openai: required unless OPENAI_BASE_URL is set)")
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
        "--temperature",
        type=temperature_arg,
        help="openai: sampling temperature, 0 to 2 (default: the server's)",
    )
    parser.add_argument("--iterations", type=int, default=15, help="experiment budget")
    parser.add_argument("--target", type=float, help="stop when the metric reaches this")
    parser.add_argument(
        "--window",
        type=window_arg,
        default=None,
        help="stateful window: 'auto' (default: messages since the last experiment) or N messages (paper: 20)",
    )
    parser.add_argument("--max-failures", type=int, default=5, help="stop after this many failures in a row")
    parser.add_argument("--server-url", help="use a running HTTP server instead of spawning one over stdio")
    parser.add_argument(
        "--hpo-threads",
        type=positive_int,
        help="threads per XGBoost training in the spawned server (default: every core; compare --parallel"
        " splits them between the modes)",
    )
    parser.add_argument(
        "--token", default=os.environ.get(ENV_TOKEN), help=f"bearer token (default ${ENV_TOKEN})"
    )


def configure(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser("run", help="run one autonomous experiment session")
    add_agent_arguments(parser)
    parser.add_argument("--mode", choices=["stateful", "stateless"], default="stateful")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--name", help="a name for the run")
    parser.add_argument("--transcript", type=Path, help="JSONL transcript (default: data dir/transcripts/)")
    parser.add_argument("--quiet", action="store_true", help="no live display")
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
    )


def spawn_args(args: argparse.Namespace) -> list[str]:
    """Extra flags for a spawned server."""
    threads = getattr(args, "hpo_threads", None)
    return [] if threads is None else ["--hpo-threads", str(threads)]


async def run_session(
    args: argparse.Namespace,
    *,
    mode: str,
    seed: int,
    transcript: Path | None = None,
    name: str | None = None,
    progress: Any = None,
) -> AgentResult:
    """Start a run on the server and drive it with one agent until CHECK stops it."""
    # A real backend is set up before anything connects, so a bad setting leaves no run (and no
    # database) behind; the scripted double needs the task as the server describes it first.
    scripted = args.llm.startswith("scripted")
    llm: LLM | None = None if scripted else build_llm(args, seed)
    try:
        async with connect(
            server_url=args.server_url,
            token=args.token,
            db=args.db,
            data=args.data,
            server_args=spawn_args(args),
        ) as rc:
            started = await rc.typed(
                "start_run",
                {
                    "task": args.task,
                    "budget": args.iterations,
                    "target": args.target,
                    "seed": seed,
                    "name": name or f"{mode} {args.llm if scripted else (args.model or args.llm)}",
                },
                StartedRun,
            )
            run_id = started.run_id
            task = await rc.task(args.task)
            if llm is None:
                llm = build_llm(args, seed, task, await rc.train_py(run_id))
            config = AgentConfig(
                task=task,
                iterations=args.iterations,
                max_failures=args.max_failures,
                window=args.window,
                max_tokens=args.max_tokens,
            )
            recorder = Transcript(run_id, mode, llm=llm, path=transcript)
            if mode == "stateful":
                agent: StatefulAgent | StatelessAgent = StatefulAgent(rc, recorder, run_id, config, progress)
            else:
                agent = StatelessAgent(rc, recorder, run_id, config, started.task_description, progress)
            result = await agent.run()
            # What the run looks like on the server at the end, read through the same door.
            result.run = await rc.run(run_id)
            result.history = await rc.history(run_id)
            return result
    finally:
        if llm is not None:
            await llm.aclose()


class LiveView:
    """Iteration, best so far and tokens used, refreshed after every LLM call."""

    def __init__(self, mode: str, llm: str) -> None:
        self.mode, self.llm = mode, llm
        self.state: dict[str, Any] = {}
        self.context = self.full = 0

    def __call__(self, event: dict[str, Any]) -> None:
        self.context += event["tokens"]["context"]
        self.full += event["tokens"]["full"]
        self.state = event

    def __rich__(self) -> Table:
        table = Table(title=Text(f"autoresearch-mcp · {self.mode} · {self.llm}"), show_header=False)
        run: Run | None = self.state.get("run")
        if run:
            best = run.best
            table.add_row("run", Text(f"{run.id} ({run.task})"))  # Text: server text is not markup
            table.add_row("iteration", f"{run.used}/{run.budget}")
            table.add_row("best", f"{best.metric:.4f} (#{best.iteration})" if best else "-")
        table.add_row("LLM calls", str(self.state.get("calls", 0)))
        table.add_row("tokens", f"context {self.context:,} · full {self.full:,}")
        return table


def print_result(console: Console, result: AgentResult) -> None:
    records = load_transcript(result.transcript)
    total = totals(records)
    best = "none" if result.best_metric is None else f"{result.best_metric:.4f}"
    # The detail can be the model's own finish reason: escaped, so `[/]` in it prints as text.
    console.print(
        f"[bold]{escape(result.mode)} run {escape(result.run_id)}[/]: "
        f"stopped ({escape(result.stop_reason)}: {escape(result.detail)})"
    )
    console.print(f"best {best} after {result.experiments} experiments, {result.llm_calls} LLM calls")
    per = total.calls / result.experiments if result.experiments else 0.0
    console.print(
        f"tokens: context {total.context:,} · full {total.full:,} · cache-weighted {total.cache_weighted:,.0f}"
        f" · output {total.output:,} · {per:.2f} LLM calls per experiment"
    )
    console.print(Text(f"transcript: {result.transcript}"))
    if result.scripted:
        console.print(f"[yellow]{SCRIPTED_NOTE}[/]")


def main(args: argparse.Namespace) -> int:
    check_agent_args(args)
    console = Console(stderr=False)
    view = LiveView(args.mode, args.llm)
    try:
        if args.quiet:
            result = asyncio.run(
                run_session(args, mode=args.mode, seed=args.seed, transcript=args.transcript, name=args.name)
            )
        else:
            with Live(view, console=console, refresh_per_second=4, transient=True):
                result = asyncio.run(
                    run_session(
                        args,
                        mode=args.mode,
                        seed=args.seed,
                        transcript=args.transcript,
                        name=args.name,
                        progress=view,
                    )
                )
    except LLMError as exc:
        raise ResearchError(str(exc)) from None
    print_result(console, result)
    return 0 if result.stop_reason != "llm-error" else 1
