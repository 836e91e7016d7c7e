"""The agent's flags, shared by `run` and `compare`, and the checks that run before anything starts.

Every value is checked where argparse reads it, so a mistake is one line naming the flag and what it
takes (`--max-failures: a whole number, 1 or more, not '0'`), before a server is spawned or a run is
stored. A type function raises ArgumentTypeError with that message: argparse would otherwise answer a
ValueError with the function's own name ("invalid window_arg value").
"""

import argparse
import math
import os
from collections.abc import Callable

from autoresearch_mcp.client.llm.base import temperature_problem
from autoresearch_mcp.client.task_folder import resolve_task_folder
from autoresearch_mcp.contract.env import ENV_TOKEN, add_location_arguments
from autoresearch_mcp.contract.errors import ResearchError
from autoresearch_mcp.contract.workers import workers_arg, workers_problem

MAX_THREADS = 256  # the bound of hpo-covertype's own hpo_threads setting
MAX_BUDGET = 10_000  # start_run's bound
MAX_REEVAL_SEEDS = 10  # start_run's bound
MAX_SEED = 2**31 - 1  # start_run's bound
MAX_BATCH = 64  # experiments one reply may propose: more is a flood, not a batch


def whole_number(subject: str, low: int, high: int | None = None, unit: str = "") -> Callable[[str], int]:
    """A type function for a whole number from `low` (to `high`). Its error reads `<subject> a whole
    number [of <unit>] from low to high, not 'x'`, after argparse's `argument --flag:`."""
    of = f" of {unit}" if unit else ""
    span = f" from {low} to {high}" if high is not None else f", {low} or more"

    def parse(value: str) -> int:
        text = value.strip()
        number = int(text) if text.isascii() and text.isdigit() else None
        if number is None or number < low or (high is not None and number > high):
            raise argparse.ArgumentTypeError(f"{subject} a whole number{of}{span}, not {value!r}")
        return number

    return parse


def _number(value: str) -> float:
    """`value` as a float, nan where it is not a number (every check below then refuses it)."""
    try:
        return float(value)
    except ValueError:
        return math.nan


def positive_seconds(value: str) -> float:
    number = _number(value)
    if not (math.isfinite(number) and number > 0):
        raise argparse.ArgumentTypeError(f"expected a number of seconds above 0, not {value!r}")
    return number


positive_int = whole_number("expected", 1, MAX_THREADS)
budget_arg = whole_number("the budget is", 1, MAX_BUDGET, "experiments")
reeval_arg = whole_number("--reeval-seeds is", 0, MAX_REEVAL_SEEDS)
token_budget_arg = whole_number("the token budget is", 1, unit="tokens")
context_window_arg = whole_number("the context window is", 1, unit="tokens")
max_tokens_arg = whole_number("expected", 1, unit="tokens")
max_failures_arg = whole_number("expected", 1, unit="calls in a row")
seed_arg = whole_number("expected", 0, MAX_SEED)
batch_arg = whole_number("--batch is", 1, MAX_BATCH, "experiments per reply")


def done_from_arg(value: str) -> float:
    number = _number(value)
    if not (math.isfinite(number) and 0 < number <= 1):
        raise argparse.ArgumentTypeError(
            f"expected a share of the budget above 0 and at most 1, not {value!r}"
        )
    return number


def window_arg(value: str) -> int | None:
    if value == "auto":
        return None
    text = value.strip()
    if not (text.isascii() and text.isdigit()):
        raise argparse.ArgumentTypeError(
            f"expected 'auto' or a whole number of messages, 0 or more, not {value!r}"
        )
    return int(text)


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


def seeds_arg(value: str) -> list[int]:
    """`42,123`: distinct whole numbers, each a seed start_run takes."""
    parts = [part.strip() for part in value.split(",")]
    if not all(p.isascii() and p.isdigit() and int(p) <= MAX_SEED for p in parts):
        raise argparse.ArgumentTypeError(
            f"expected comma-separated whole numbers from 0 to {MAX_SEED} (e.g. 42,123,456), not {value!r}"
        )
    seeds = [int(p) for p in parts]
    if len(set(seeds)) != len(seeds):
        raise argparse.ArgumentTypeError(f"each seed once: {value!r} repeats one")
    return seeds


def batch_problem(batch: int, mode: str) -> str | None:
    """Why `--batch` cannot apply to this mode, if it cannot (a task's kind is checked once it is known)."""
    if batch > 1 and mode != "stateful":
        return (
            f"--batch {batch} is read by the stateful agent; --mode {mode} proposes one experiment per call:"
            " drop --batch or use --mode stateful"
        )
    return None


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
    workers = getattr(args, "workers", None)
    if workers is not None and args.server_url:
        raise ResearchError(
            "--workers configures a server this command spawns; with --server-url, start that server"
            " with `autoresearch-mcp serve --workers N` instead"
        )
    if (problem := workers_problem(workers, getattr(args, "force", False))) is not None:
        raise ResearchError(problem)


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
    parser.add_argument(
        "--max-tokens", type=max_tokens_arg, default=1024, help="max output tokens per LLM call"
    )
    parser.add_argument(
        "--base-url",
        help="LLM endpoint, e.g. http://127.0.0.1:8080/v1 (default: OPENAI_BASE_URL / ANTHROPIC_BASE_URL, else the provider's)",
    )
    parser.add_argument(
        "--prompt-caching",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="anthropic: send cache_control breakpoints (the system prompt and tools; the stateless"
        " baseline's history), as a careful client does (default: on; --no-prompt-caching: off)",
    )
    parser.add_argument(
        "--llm-timeout",
        type=positive_seconds,
        default=120.0,
        help="seconds one LLM call may take (raise for slow local models)",
    )
    parser.add_argument(
        "--tool-choice",
        default="auto",
        help="openai: 'auto', or a tool name to force every turn (helps small local models); where the "
        "model answers in JSON text (--param-replies text), any tool name forces a JSON reply instead",
    )
    parser.add_argument(
        "--tool-results-as-text",
        action="store_true",
        help="openai: send tool results as user text, for servers whose chat template drops tool messages",
    )
    parser.add_argument(
        "--profile",
        choices=("auto", "small", "neutral"),
        default="auto",
        help="the agent's profile: small (what helps a small local model: a value to change named each "
        "turn, an early DONE questioned, reverts counted as failures) or neutral (facts, no orders); "
        "auto: small for the scripted double, an openai endpoint on this machine or a model named 3B or "
        "smaller, else neutral",
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
        "--param-replies",
        choices=("tool", "text"),
        default="text",
        help="stateful, params tasks: the model answers with one JSON object of the params it changes, "
        "which the agent sends as run_experiment (text: no tool definitions billed on every call), or "
        "makes the run_experiment call itself (tool)",
    )
    parser.add_argument(
        "--first",
        choices=("defaults", "model"),
        default="defaults",
        help="params tasks: a new run's first experiment is the task's defaults, recorded before the "
        "model is asked, in every mode (defaults), or the model's own first proposal (model, as the "
        "paper's runner did)",
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
        "--context-window",
        type=context_window_arg,
        metavar="N",
        help="the model's window in its own tokens (e.g. 16384 for a local server started so): a run whose"
        " next prompt plus --max-tokens would not fit stops there with reason context-window, instead of"
        " being cut off by the server (default: not checked)",
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
        type=max_failures_arg,
        default=5,
        help="stop after this many calls in a row without a good experiment (refusals, crashes, reverts)",
    )
    parser.add_argument(
        "--done-from",
        type=done_from_arg,
        default=0.5,
        metavar="SHARE",
        help="the share of the budget spent from which the model's DONE ends the run (default 0.5; 1: the"
        " whole budget, whatever the model says); before it the model is told how many are left",
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
        "--workers",
        type=workers_arg,
        metavar="N",
        help="experiments the spawned server measures at once as background jobs, each with its share of"
        " the cores' training threads (default: one per core)",
    )
    parser.add_argument("--force", action="store_true", help="allow --workers above the number of cores")
    parser.add_argument(
        "--token",
        default=os.environ.get(ENV_TOKEN),
        help=f"bearer token for --server-url (default ${ENV_TOKEN})",
    )
