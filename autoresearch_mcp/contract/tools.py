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
from urllib.parse import urlencode

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
    # The summary in the words of the bundled agent's small-model profile: read by that agent.
    SMALL_SUMMARY = "autoresearch://runs/{run_id}/summary/small"
    # What a model reads before its next step (server/turn.py): the summary, the code in focus on a
    # code task, and the request. `profile`: neutral (facts, the default) or small (the bundled agent's
    # words for a small model); `reply`: the reply protocol the request asks for (tool, json, text);
    # `shown`, `skip`: functions the reader already holds as they are now, and ones it set aside.
    TURN = "autoresearch://runs/{run_id}/turn{?profile,reply,shown,skip,last}"
    HISTORY = "autoresearch://runs/{run_id}/history"
    TRAIN_PY = "autoresearch://runs/{run_id}/train.py"
    VERSION = "autoresearch://runs/{run_id}/versions/{version}"
    TASKS = "autoresearch://tasks"
    TASK = "autoresearch://tasks/{name}"
    # How the bundled agent works on a task (its profile: prompts, tools offered, fixed arguments):
    # read by that agent alone, so a host reading the task is not sent another agent's words.
    TASK_AGENT = "autoresearch://tasks/{name}/agent"
    # The scripted test double's plan for a task: read by the double alone, so no host is sent it.
    SCRIPTED_PLAN = "autoresearch://tasks/{name}/scripted-plan"

    def of(self, **values: object) -> str:
        """The URI with `values` filled in; a query variable left out or empty is left off."""
        path, _, query = self.value.partition("{?")
        names = query.rstrip("}").split(",") if query else []
        given = {name: values.pop(name) for name in names if name in values}
        uri = path.format(**values)
        pairs = [(name, _query_value(value)) for name, value in given.items()]
        pairs = [(name, value) for name, value in pairs if value]
        return uri + ("?" + urlencode(pairs, safe=",") if pairs else "")


def _query_value(value: object) -> str:
    """A query variable's text: a collection as its sorted items, comma-separated (RFC 6570's form)."""
    if value is None:
        return ""
    if isinstance(value, list | tuple | set | frozenset):
        return ",".join(sorted(map(str, value)))
    return str(value)


# The templates whose {run_id} names a run (completions offer the known runs there).
RUN_URIS = (Uri.RUN, Uri.SUMMARY, Uri.SMALL_SUMMARY, Uri.TURN, Uri.HISTORY, Uri.TRAIN_PY, Uri.VERSION)


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
        "Start a run; its answer: run_id, params, summary. A call without run_id means this "
        "connection's run, else the only one running.",
        "runs",
    ),
    Tool(
        ToolName.LIST_RUNS,
        a.ListRunsArgs,
        READ_ONLY,
        "Every run, newest first.",
        "runs",
    ),
    Tool(
        ToolName.GET_RUN_SUMMARY,
        a.GetRunSummaryArgs,
        READ_ONLY,
        "The run's summary.",
        "runs",
    ),
    Tool(
        ToolName.ADD_NOTE,
        a.AddNoteArgs,
        ADDITIVE,
        "Record a plan or a failed approach.",
        "runs",
    ),
    Tool(
        ToolName.FINISH_RUN,
        a.FinishRunArgs,
        ADDITIVE_IDEMPOTENT,
        "End the run.",
        "runs",
    ),
    Tool(
        ToolName.RUN_EXPERIMENT,
        a.RunExperimentArgs,
        ADDITIVE,
        "Params tasks ({params_tasks}): train and score train.py with params; one unit of budget.",
        "experiments",
    ),
    Tool(
        ToolName.RUN_BENCHMARK,
        a.RunBenchmarkArgs,
        ADDITIVE,
        "Code tasks ({code_tasks}): check and time train.py (one unit of budget).",
        "experiments",
    ),
    Tool(
        ToolName.GET_EXPERIMENT_HISTORY,
        a.GetExperimentHistoryArgs,
        READ_ONLY,
        f"Experiments as a table, {HISTORY_PAGE} a page.",
        "experiments",
    ),
    Tool(
        ToolName.GET_CURRENT_TRAIN_PY,
        a.GetCurrentTrainPyArgs,
        READ_ONLY,
        "The current train.py.",
        "train_py",
    ),
    Tool(
        ToolName.MODIFY_TRAIN_PY,
        a.ModifyTrainPyArgs,
        ADDITIVE,
        "Change train.py by `source` or `edits`.",
        "train_py",
    ),
    Tool(
        ToolName.REPLACE_FUNCTION,
        a.ReplaceFunctionArgs,
        ADDITIVE,
        "Code tasks: replace one function of train.py.",
        "train_py",
    ),
    Tool(
        ToolName.REVERT_TRAIN_PY,
        a.RevertTrainPyArgs,
        ADDITIVE,
        "Restore an earlier version of train.py.",
        "train_py",
    ),
    Tool(
        ToolName.PROFILE_TRAIN_PY,
        a.ProfileTrainPyArgs,
        READ_ONLY,
        "Code tasks: where train.py spends its time (free).",
        "train_py",
    ),
    Tool(
        ToolName.SUBMIT_TRAINING_JOB,
        a.SubmitTrainingJobArgs,
        ADDITIVE,
        "Params tasks ({params_tasks}): run_experiment in the background, returning a job_id; several run at once.",
        "jobs",
    ),
    Tool(
        ToolName.GET_JOB,
        a.GetJobArgs,
        READ_ONLY,
        "A job's status and experiment.",
        "jobs",
    ),
    Tool(
        ToolName.QUERY_RESULTS,
        a.QueryResultsArgs,
        READ_ONLY,
        "Read-only SQLite SELECT over views {views}.",
        "query",
    ),
)
# The arguments model -> its tool: a call is made by its arguments alone (client/connect.py).
TOOL_OF: dict[type[a.Arguments[BaseModel]], Tool] = {tool.arguments: tool for tool in TOOLS.values()}
