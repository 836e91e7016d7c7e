"""Tools that run or read experiments: run_experiment, run_benchmark, get_experiment_history."""

import json
from typing import Annotated, Any, Literal

from mcp.server import MCPServer
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context
from mcp.types import CallToolResult
from pydantic import Field, WithJsonSchema

from autoresearch_mcp.contract.errors import ResearchError
from autoresearch_mcp.contract.models import ExperimentResult, ExperimentStatus, HistoryPage, ParamsBase
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.runs import HISTORY_MAX, HISTORY_PAGE
from autoresearch_mcp.server.tasks.registry import make_task, task_names
from autoresearch_mcp.server.tools.common import (
    ADDITIVE,
    READ_ONLY,
    RunId,
    RunResolver,
    refusal_result,
    refusals,
    task_names_of_kind,
    with_progress,
)


def params_schema(research: Research) -> dict[str, Any]:
    """The JSON schema of `params`: each task's parameter model (validated again, per task, inside)."""
    variants = []
    settings = research.settings.task_settings()
    for name in task_names(settings):
        schema = make_task(name, settings).params_model.model_json_schema()
        schema["title"] = f"{name} params"
        variants.append(schema)
    return {
        "anyOf": variants,
        "description": "the task's parameters, all inside this one object (the run's task decides which"
        " apply; unknown keys are refused)",
    }


def params_type(research: Research) -> Any:
    return Annotated[dict[str, Any], WithJsonSchema(params_schema(research))]


PARAMS_TOOLS = ("run_experiment", "submit_training_job")
OTHER_ARGUMENTS = {"params", "note", "base", "run_id"}
BaseArg = Annotated[
    ParamsBase,
    Field(
        description='what the params you leave out take: "defaults" (the task\'s), or "best" (the best '
        "experiment's values, so you send only what you change)"
    ),
]


def flat_params_refusal(tool: str, arguments: dict[str, Any]) -> CallToolResult | None:
    """A call that sends the task parameters at the top level ({"n_estimators": 50}) instead of inside
    `params`: the SDK would drop the unknown keys and answer with a bare "Field required" dump."""
    if tool not in PARAMS_TOOLS or "params" in arguments:
        return None
    flat = {key: value for key, value in arguments.items() if key not in OTHER_ARGUMENTS}
    example = json.dumps({"params": flat or {"name": "value"}})[:300]
    what = f"got {', '.join(sorted(flat))} at the top level" if flat else "no params were given"
    return refusal_result(
        ResearchError(
            f"{tool} takes the task parameters inside one `params` object ({what}); call it again as {example}",
            kind="invalid_params",
        )
    )


def guard_flat_params(mcp: MCPServer) -> None:
    """Answer flat calls to the params tools with a refusal that says how to wrap them."""

    async def middleware(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method == "tools/call" and ctx.params is not None:
            arguments = ctx.params.get("arguments") or {}
            if isinstance(arguments, dict):
                refusal = flat_params_refusal(str(ctx.params.get("name")), arguments)
                if refusal is not None:
                    return refusal
        return await call_next(ctx)

    mcp.middleware.append(middleware)


def register(mcp: MCPServer, research: Research, run_for: RunResolver) -> None:
    service = research.runs
    Params = params_type(research)
    params_tasks = task_names_of_kind(research, "run_experiment")
    code_tasks = task_names_of_kind(research, "run_benchmark")
    guard_flat_params(mcp)

    @mcp.tool(
        annotations=ADDITIVE,
        description=f"For params tasks ({params_tasks}): train and score the current train.py with these "
        'params (one unit of budget), e.g. {"params": {"n_estimators": 200}}. Refused without cost: '
        "invalid params (the message lists the ranges) and exact repeats. Sends progress while it trains.",
    )
    @refusals
    async def run_experiment(
        ctx: Context,
        params: Params,
        note: Annotated[str | None, Field(max_length=2000, description="why this experiment")] = None,
        base: BaseArg = "defaults",
        run_id: RunId = None,
    ) -> ExperimentResult:
        # Resolved in the worker thread too: it reads the store, as the experiment does.
        return await with_progress(
            ctx,
            "experiment",
            lambda: service.run_experiment(run_for(ctx, run_id), params, note, base=base),
        )

    @mcp.tool(
        annotations=ADDITIVE,
        description=f"For code tasks ({code_tasks}): check the current train.py for correctness on fresh "
        "inputs and time it (one unit of budget). Sends progress while it runs.",
    )
    @refusals
    async def run_benchmark(ctx: Context, run_id: RunId = None) -> ExperimentResult:
        return await with_progress(ctx, "benchmark", lambda: service.run_benchmark(run_for(ctx, run_id)))

    @mcp.tool(
        annotations=READ_ONLY,
        description="A page of recorded experiments (params, metrics, status, duration, note, error): the "
        f"most recent `last`, or else {HISTORY_PAGE} from `offset`, with next_offset to read on.",
    )
    @refusals
    def get_experiment_history(
        ctx: Context,
        run_id: RunId = None,
        last: Annotated[
            int | None,
            Field(ge=1, le=HISTORY_MAX, description=f"only the most recent N (at most {HISTORY_MAX})"),
        ] = None,
        offset: Annotated[int, Field(ge=0, le=1_000_000_000, description="skip this many")] = 0,
        order: Annotated[
            Literal["iteration", "metric"], Field(description="iteration order, or best first")
        ] = "iteration",
        status: Annotated[ExperimentStatus | None, Field(description="only this status")] = None,
    ) -> HistoryPage:
        return service.history(run_for(ctx, run_id), last, offset, order, status)
