"""The MCP glue: tools, resources and the prompt, each a thin call into RunService.

Names and arguments follow the contract in DESIGN.md. Run logic errors become ToolError, so the model
reads the reason; nothing here decides anything about runs.
"""

import functools
from collections.abc import Callable
from typing import Annotated, Any, Literal, ParamSpec, TypeVar

from mcp.server import MCPServer
from mcp.server.auth.provider import TokenVerifier
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from autoresearch_mcp import __version__
from autoresearch_mcp.contract.errors import ResearchError
from autoresearch_mcp.contract.models import (
    ArtifactInfo,
    ArtifactVersion,
    ExperimentResult,
    ExperimentStatus,
    HistoryPage,
    Note,
    RunList,
    RunStatus,
    StartedRun,
    SummaryText,
)
from autoresearch_mcp.server.jobs import JobService
from autoresearch_mcp.server.program import render_program
from autoresearch_mcp.server.runs import RunService
from autoresearch_mcp.server.settings import ServerSettings
from autoresearch_mcp.server.store import Store
from autoresearch_mcp.server.tasks.registry import make_task, task_names
from autoresearch_mcp.server.text import prompt_error
from autoresearch_mcp.server.tools.jobs import register_job_tools, register_query_tool

P = ParamSpec("P")
R = TypeVar("R")

INSTRUCTIONS = (
    "Autonomous ML experimentation with server-side state. start_run, then loop: read get_run_summary, "
    "run one experiment (run_experiment, or modify_train_py + run_benchmark), add notes; finish_run at the end. "
    "The prompt `autoresearch` has the full instructions."
)

READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
ADDITIVE = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
)
ADDITIVE_IDEMPOTENT = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)

RunId = Annotated[
    str | None,
    Field(
        default=None,
        min_length=1,
        max_length=64,
        description="default: this session's run, else the latest running run",
    ),
]


class Edit(BaseModel):
    model_config = ConfigDict(extra="forbid")
    search: str = Field(min_length=1, max_length=20_000, description="exact text, occurring once in train.py")
    replace: str = Field(max_length=20_000, description="its replacement")


def tool_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Run-logic refusals become ToolError: the model sees the message and can act on it."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except ResearchError as exc:
            raise ToolError(str(exc)) from None

    return wrapper


def _params_schema(names: list[str], settings: ServerSettings) -> dict[str, Any]:
    """The JSON schema of `params`: each task's parameter model (validated again, per task, inside)."""
    variants = []
    for name in names:
        schema = make_task(name, settings.task_settings()).params_model.model_json_schema()
        schema["title"] = f"{name} params"
        variants.append(schema)
    return {"anyOf": variants, "description": "task parameters; unknown keys are refused"}


def _artifact_info(version: ArtifactVersion, with_source: bool) -> ArtifactInfo:
    return ArtifactInfo(
        run_id=version.run_id,
        version=version.version,
        sha256=version.sha256,
        description=version.description,
        source=version.source if with_source else None,
        lines=version.source.count("\n") + 1,
    )


SESSION_RUN_KEY = "autoresearch.run_id"


def _connection_state(ctx: Context) -> dict[str, Any]:
    """Scratch state that lives as long as the client's connection (the SDK's per-connection dict).

    ServerSession is per request in mcp 2.x; its connection is what persists between calls. Where a
    transport makes a connection per request, the state is fresh each time and run_id falls back to the
    most recent running run.
    """
    connection = getattr(ctx.session, "_connection", None)
    state = getattr(connection, "state", None)
    return state if isinstance(state, dict) else {}


def build_server(
    settings: ServerSettings | None = None,
    *,
    token_verifier: TokenVerifier | None = None,
    auth: AuthSettings | None = None,
) -> MCPServer:
    """The MCP server. `token_verifier` and `auth` (together) protect it over HTTP; see http.py."""
    settings = settings or ServerSettings()
    store = Store(settings.db_path)
    service = RunService(store, settings)
    service.recover()
    jobs = JobService(service, settings)
    jobs.recover()
    names = task_names()
    TaskName = Literal[tuple(names)]  # type: ignore[valid-type]
    Params = Annotated[dict[str, Any], WithJsonSchema(_params_schema(names, settings))]

    def run_for(ctx: Context, run_id: str | None) -> str:
        """Resolve the run and remember it as this session's run."""
        state = _connection_state(ctx)
        resolved = service.default_run_id(run_id or state.get(SESSION_RUN_KEY))
        service.store.get_run(resolved)  # unknown id -> clear error
        state[SESSION_RUN_KEY] = resolved
        return resolved

    mcp = MCPServer(
        "autoresearch",
        version=__version__,
        instructions=INSTRUCTIONS,
        token_verifier=token_verifier,
        auth=auth,
    )

    @mcp.tool(annotations=ADDITIVE)
    @tool_errors
    def start_run(
        ctx: Context,
        task: Annotated[TaskName, Field(description="which task to run")],
        budget: Annotated[int, Field(ge=1, le=10_000, description="max experiments")] = 15,
        target: Annotated[float | None, Field(description="stop when the metric reaches this")] = None,
        seed: Annotated[int, Field(ge=0, le=2**31 - 1)] = 42,
        name: Annotated[str | None, Field(max_length=100)] = None,
    ) -> StartedRun:
        """Start an autonomous run on a task; it becomes this session's run."""
        run, summary = service.start_run(task, budget, target, seed, name)
        _connection_state(ctx)[SESSION_RUN_KEY] = run.id
        spec = service.task(task)
        return StartedRun(
            run_id=run.id,
            summary=summary,
            task_description=spec.describe(),
            metric=spec.metric,
            experiment_tool=spec.experiment_tool,
        )

    @mcp.tool(annotations=READ_ONLY)
    @tool_errors
    def list_runs(status: RunStatus | None = None) -> RunList:
        """Runs with task, status, best result and budget used, newest first."""
        return RunList(runs=service.list_runs(status))

    @mcp.tool(annotations=ADDITIVE)
    @tool_errors
    def run_experiment(
        ctx: Context,
        params: Params,
        note: Annotated[str | None, Field(max_length=2000, description="why this experiment")] = None,
        run_id: RunId = None,
    ) -> ExperimentResult:
        """Train and score the current train.py with these params (one unit of budget).

        Refused without cost: invalid params (the message lists the ranges) and exact repeats."""
        return service.run_experiment(run_for(ctx, run_id), params, note)

    @mcp.tool(annotations=READ_ONLY)
    @tool_errors
    def get_experiment_history(
        ctx: Context,
        run_id: RunId = None,
        last: Annotated[int | None, Field(ge=1, le=1000, description="only the most recent N")] = None,
        offset: Annotated[int, Field(ge=0, le=1_000_000_000)] = 0,
        order: Literal["iteration", "metric"] = "iteration",
        status: ExperimentStatus | None = None,
    ) -> HistoryPage:
        """A page of recorded experiments (params, metrics, status, duration, note, error)."""
        return service.history(run_for(ctx, run_id), last, offset, order, status)

    @mcp.tool(annotations=READ_ONLY)
    @tool_errors
    def get_run_summary(ctx: Context, run_id: RunId = None) -> SummaryText:
        """The compact, bounded summary of a run (same as the summary resource)."""
        resolved = run_for(ctx, run_id)
        return SummaryText(run_id=resolved, summary=service.summary(resolved))

    @mcp.tool(annotations=ADDITIVE)
    @tool_errors
    def add_note(
        ctx: Context,
        text: Annotated[str, Field(min_length=1, max_length=2000)],
        kind: Literal["strategy", "failed"] = "strategy",
        run_id: RunId = None,
    ) -> Note:
        """Record a strategy note or a failed approach; the summary shows the latest ones."""
        return service.add_note(run_for(ctx, run_id), text, kind)

    @mcp.tool(annotations=ADDITIVE_IDEMPOTENT)
    @tool_errors
    def finish_run(
        ctx: Context, reason: Annotated[str, Field(min_length=1, max_length=500)], run_id: RunId = None
    ) -> SummaryText:
        """End the run (it takes no more experiments) and return its final summary."""
        resolved = run_for(ctx, run_id)
        _, summary = service.finish_run(resolved, reason)
        return SummaryText(run_id=resolved, summary=summary)

    @mcp.tool(annotations=READ_ONLY)
    @tool_errors
    def get_current_train_py(ctx: Context, run_id: RunId = None) -> ArtifactInfo:
        """The current train.py: source, version, sha256."""
        return _artifact_info(service.current_artifact(run_for(ctx, run_id)), with_source=True)

    @mcp.tool(annotations=ADDITIVE)
    @tool_errors
    def modify_train_py(
        ctx: Context,
        description: Annotated[str, Field(min_length=1, max_length=500, description="what and why")],
        source: Annotated[str | None, Field(max_length=200_000, description="the whole new file")] = None,
        edits: Annotated[list[Edit] | None, Field(max_length=50, description="search/replace edits")] = None,
        run_id: RunId = None,
    ) -> ArtifactInfo:
        """Change train.py: exactly one of `source` or `edits`. Guardrails check it first; a rejected
        edit changes nothing and says why. Every version is kept."""
        pairs = None if edits is None else [(e.search, e.replace) for e in edits]
        version = service.modify_artifact(run_for(ctx, run_id), description, source, pairs)
        return _artifact_info(version, with_source=False)

    @mcp.tool(annotations=ADDITIVE)
    @tool_errors
    def revert_train_py(
        ctx: Context,
        version: Annotated[int, Field(ge=1, le=1_000_000, description="1 = the original")],
        run_id: RunId = None,
    ) -> ArtifactInfo:
        """Restore an earlier version of train.py (as a new version)."""
        return _artifact_info(service.revert_artifact(run_for(ctx, run_id), version), with_source=False)

    @mcp.tool(annotations=ADDITIVE)
    @tool_errors
    def run_benchmark(ctx: Context, run_id: RunId = None) -> ExperimentResult:
        """Check the current train.py for correctness on fresh inputs and time it (one unit of budget)."""
        return service.run_benchmark(run_for(ctx, run_id))

    register_job_tools(mcp, jobs, run_for, Params)
    register_query_tool(mcp, settings.db_path)

    # -- resources -------------------------------------------------------------------------
    def _resource(fn: Callable[[str], str]) -> Callable[[str], str]:
        @functools.wraps(fn)
        def wrapper(run_id: str) -> str:
            try:
                return fn(run_id)
            except ResearchError as exc:
                raise ResourceNotFoundError(str(exc)) from None

        return wrapper

    @mcp.resource("autoresearch://runs", name="runs", mime_type="application/json")
    def runs_resource() -> str:
        """Every run with task, status, best and budget used."""
        return RunList(runs=service.list_runs()).model_dump_json()

    @mcp.resource("autoresearch://runs/{run_id}/summary", name="run-summary", mime_type="text/plain")
    @_resource
    def summary_resource(run_id: str) -> str:
        """The bounded summary the agent reads every turn."""
        return service.summary(run_id)

    @mcp.resource("autoresearch://runs/{run_id}/history", name="run-history", mime_type="application/json")
    @_resource
    def history_resource(run_id: str) -> str:
        """Every experiment of the run, in iteration order."""
        return service.history(run_id, None, 0, "iteration", None).model_dump_json()

    @mcp.resource("autoresearch://runs/{run_id}/train.py", name="run-train-py", mime_type="text/x-python")
    @_resource
    def train_py_resource(run_id: str) -> str:
        """The current train.py."""
        return service.current_artifact(run_id).source

    @mcp.prompt()
    def autoresearch(task: str = "hpo-covertype") -> str:
        """The research instructions (goal, tools, rules, when to stop) for a task."""
        try:
            return render_program(service.task(task))
        except ResearchError as exc:
            raise prompt_error(str(exc)) from None

    mcp.service = service  # type: ignore[attr-defined]  # for tests and the HTTP/dashboard layers
    mcp.jobs = jobs  # type: ignore[attr-defined]  # its owner closes it (JobService.close) at shutdown
    return mcp
