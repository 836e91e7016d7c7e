"""The MCP surface, written once: every tool's name, arguments, result, annotations and description,
and every resource's URI.

The server registers its tools from TOOLS (server/tools/), the client calls them through it
(client/connect.py), and the docs' tool tables are checked against it (tests/test_docs.py). The names
and arguments are a contract that examples and outside clients rely on: never rename or remove one.
A description may hold `{placeholders}` that only the server can fill (which tasks it registers, the
views query_results reads).
"""

from dataclasses import dataclass
from enum import StrEnum

from pydantic import BaseModel

from autoresearch_mcp.contract import arguments as a
from autoresearch_mcp.contract.arguments import HISTORY_PAGE


class ToolName(StrEnum):
    START_RUN = "start_run"
    LIST_RUNS = "list_runs"
    GET_RUN_SUMMARY = "get_run_summary"
    ADD_NOTE = "add_note"
    FINISH_RUN = "finish_run"
    RUN_EXPERIMENT = "run_experiment"
    RUN_BENCHMARK = "run_benchmark"
    GET_EXPERIMENT_HISTORY = "get_experiment_history"
    GET_CURRENT_TRAIN_PY = "get_current_train_py"
    MODIFY_TRAIN_PY = "modify_train_py"
    REPLACE_FUNCTION = "replace_function"
    REVERT_TRAIN_PY = "revert_train_py"
    PROFILE_TRAIN_PY = "profile_train_py"
    SUBMIT_TRAINING_JOB = "submit_training_job"
    GET_JOB = "get_job"
    QUERY_RESULTS = "query_results"


# The tools that record an experiment: the one a task evaluates its train.py with.
EXPERIMENT_TOOLS = (ToolName.RUN_EXPERIMENT, ToolName.RUN_BENCHMARK)
# The tools that change train.py.
EDIT_TOOLS = (ToolName.MODIFY_TRAIN_PY, ToolName.REPLACE_FUNCTION, ToolName.REVERT_TRAIN_PY)


class Uri(StrEnum):
    """Every resource, as its URI template. `Uri.SUMMARY.of(run_id="r-1")` is one resource's URI."""

    RUNS = "autoresearch://runs"
    RUN = "autoresearch://runs/{run_id}"
    SUMMARY = "autoresearch://runs/{run_id}/summary"
    HISTORY = "autoresearch://runs/{run_id}/history"
    TRAIN_PY = "autoresearch://runs/{run_id}/train.py"
    VERSION = "autoresearch://runs/{run_id}/versions/{version}"
    TASKS = "autoresearch://tasks"
    TASK = "autoresearch://tasks/{name}"
    # The scripted test double's plan for a task: read by the double alone, so no host is sent it.
    SCRIPTED_PLAN = "autoresearch://tasks/{name}/scripted-plan"

    def of(self, **values: object) -> str:
        return self.value.format(**values)


# The templates whose {run_id} names a run (completions offer the known runs there).
RUN_URIS = (Uri.RUN, Uri.SUMMARY, Uri.HISTORY, Uri.TRAIN_PY, Uri.VERSION)


@dataclass(frozen=True)
class Hints:
    """A tool's annotations, named as MCP's ToolAnnotations names them (the server hands them over as
    such). Plain here so that what imports the contract (job workers, sandboxes, the client) does not
    pay for importing mcp: a second of CPU on each process start."""

    read_only_hint: bool
    idempotent_hint: bool
    open_world_hint: bool = False
    destructive_hint: bool | None = None


READ_ONLY = Hints(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
ADDITIVE = Hints(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)
ADDITIVE_IDEMPOTENT = Hints(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)


@dataclass(frozen=True)
class Tool:
    """One tool of the surface: its arguments model (which names its result model), annotations
    (true ones: no tool is destructive), description, and `subject`: the module under server/tools/
    that holds its logic, as a function named like the tool."""

    name: ToolName
    arguments: type[a.Arguments[BaseModel]]
    annotations: Hints
    description: str
    subject: str

    @property
    def result(self) -> type[BaseModel]:
        return self.arguments.result_model()

    @property
    def takes_run(self) -> bool:
        """Whether the tool works on one run (named by `run_id`, or the connection's default)."""
        return "run_id" in self.arguments.model_fields


def _tools(*tools: Tool) -> dict[ToolName, Tool]:
    return {tool.name: tool for tool in tools}


TOOLS = _tools(
    Tool(
        ToolName.START_RUN,
        a.StartRunArgs,
        ADDITIVE,
        "Start an autonomous run on a task and return its run_id: pass that run_id to every later call "
        "(the server may hold other runs at the same time).\n\nWith from_run, the run starts where an "
        "earlier run of the task left off: before this returns, the earlier best (its params, on its "
        "train.py) is re-measured as experiment #1, which costs one unit of this run's budget; the summary "
        "carries the earlier best, notes and failed approaches.",
        "runs",
    ),
    Tool(
        ToolName.LIST_RUNS,
        a.ListRunsArgs,
        READ_ONLY,
        "Runs with task, status, best result and budget used, newest first.",
        "runs",
    ),
    Tool(
        ToolName.GET_RUN_SUMMARY,
        a.GetRunSummaryArgs,
        READ_ONLY,
        "The compact, bounded summary of a run (same as the summary resource).",
        "runs",
    ),
    Tool(
        ToolName.ADD_NOTE,
        a.AddNoteArgs,
        ADDITIVE,
        "Record a strategy note or a failed approach; the summary shows the latest ones.",
        "runs",
    ),
    Tool(
        ToolName.FINISH_RUN,
        a.FinishRunArgs,
        ADDITIVE_IDEMPOTENT,
        "End the run (it takes no more experiments) and return its final summary.",
        "runs",
    ),
    Tool(
        ToolName.RUN_EXPERIMENT,
        a.RunExperimentArgs,
        ADDITIVE,
        "For params tasks ({params_tasks}): train and score the current train.py with these params (one "
        'unit of budget), e.g. {{"params": {{"n_estimators": 200}}}}. Refused without cost: invalid params'
        " (the message lists the ranges) and exact repeats. Sends progress while it trains.",
        "experiments",
    ),
    Tool(
        ToolName.RUN_BENCHMARK,
        a.RunBenchmarkArgs,
        ADDITIVE,
        "For code tasks ({code_tasks}): check the current train.py for correctness on fresh inputs and "
        "time it (one unit of budget). Sends progress while it runs.",
        "experiments",
    ),
    Tool(
        ToolName.GET_EXPERIMENT_HISTORY,
        a.GetExperimentHistoryArgs,
        READ_ONLY,
        "A page of recorded experiments (params, metrics, status, duration, note, error): the most recent "
        f"`last`, or else {HISTORY_PAGE} from `offset`, with next_offset to read on.",
        "experiments",
    ),
    Tool(
        ToolName.GET_CURRENT_TRAIN_PY,
        a.GetCurrentTrainPyArgs,
        READ_ONLY,
        "Any task: the current train.py (source, version, sha256). Read it before editing it. Code tasks "
        "(codeopt-records) are worked by editing it; params tasks may change their model setup in it too.",
        "train_py",
    ),
    Tool(
        ToolName.MODIFY_TRAIN_PY,
        a.ModifyTrainPyArgs,
        ADDITIVE,
        "Any task (the main tool of code tasks such as codeopt-records): change train.py with exactly one "
        "of `source` or `edits`, keeping the entry points and harness calls it has. Guardrails check it "
        "first; a rejected edit changes nothing and says why. Every version is kept.",
        "train_py",
    ),
    Tool(
        ToolName.REPLACE_FUNCTION,
        a.ReplaceFunctionArgs,
        ADDITIVE,
        "Code tasks: replace one top-level function of train.py with a new definition, checked by the AST "
        "(one def, the same name and parameters); everything else in the file stays as it was. The "
        "guardrails check the result; a refused one changes nothing and says why. Every version is kept.",
        "train_py",
    ),
    Tool(
        ToolName.REVERT_TRAIN_PY,
        a.RevertTrainPyArgs,
        ADDITIVE,
        "Any task: restore an earlier version of train.py (as a new version).",
        "train_py",
    ),
    Tool(
        ToolName.PROFILE_TRAIN_PY,
        a.ProfileTrainPyArgs,
        READ_ONLY,
        "Code tasks: where the current train.py spends its time on the task's own input: each function's "
        "share, and the slowest lines of the hottest one. The profile its benchmark took, or one taken now "
        "in the sandbox (no budget used; apart from any timing, so it decides nothing).",
        "train_py",
    ),
    Tool(
        ToolName.SUBMIT_TRAINING_JOB,
        a.SubmitTrainingJobArgs,
        ADDITIVE,
        "For params tasks ({params_tasks}): start an experiment in the background and return its job id "
        "at once (poll with get_job). Same rules as run_experiment: invalid params and exact repeats are "
        "refused without cost; a submitted job takes its unit of budget immediately. Several jobs run at "
        "the same time.",
        "jobs",
    ),
    Tool(
        ToolName.GET_JOB,
        a.GetJobArgs,
        READ_ONLY,
        "A job's status (queued, running, done, failed) and, once it has ended, its experiment. With "
        "wait_seconds, it sends progress every second while it waits.",
        "jobs",
    ),
    Tool(
        ToolName.QUERY_RESULTS,
        a.QueryResultsArgs,
        READ_ONLY,
        "Read-only SQL (one SELECT; SQLite dialect, json_extract for JSON columns) over these views of "
        "every run:\n{views}\nRaw tables, writes, PRAGMA and ATTACH are refused; a query stops after 2 s.",
        "query",
    ),
)
# The arguments model -> its tool: a call is made by its arguments alone (client/connect.py).
TOOL_OF: dict[type[a.Arguments[BaseModel]], Tool] = {tool.arguments: tool for tool in TOOLS.values()}
