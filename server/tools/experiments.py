"""Tools that run or read experiments: run_experiment, run_benchmark, get_experiment_history."""

from typing import Annotated, Any, Literal

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from pydantic import Field, WithJsonSchema

from autoresearch_mcp.contract.models import ExperimentResult, ExperimentStatus, HistoryPage
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.tasks.registry import make_task, task_names
from autoresearch_mcp.server.tools.common import ADDITIVE, READ_ONLY, RunId, RunResolver, refusals


def params_schema(research: Research) -> dict[str, Any]:
    """The JSON schema of `params`: each task's parameter model (validated again, per task, inside)."""
    variants = []
    for name in task_names():
        schema = make_task(name, research.settings.task_settings()).params_model.model_json_schema()
        schema["title"] = f"{name} params"
        variants.append(schema)
    return {"anyOf": variants, "description": "task parameters; unknown keys are refused"}


def params_type(research: Research) -> Any:
    return Annotated[dict[str, Any], WithJsonSchema(params_schema(research))]


def register(mcp: MCPServer, research: Research, run_for: RunResolver) -> None:
    service = research.runs
    Params = params_type(research)

    @mcp.tool(annotations=ADDITIVE)
    @refusals
    def run_experiment(
        ctx: Context,
        params: Params,
        note: Annotated[str | None, Field(max_length=2000, description="why this experiment")] = None,
        run_id: RunId = None,
    ) -> ExperimentResult:
        """For params tasks (hpo-covertype): train and score the current train.py with these params (one
        unit of budget). Refused without cost: invalid params (the message lists the ranges) and exact
        repeats."""
        return service.run_experiment(run_for(ctx, run_id), params, note)

    @mcp.tool(annotations=ADDITIVE)
    @refusals
    def run_benchmark(ctx: Context, run_id: RunId = None) -> ExperimentResult:
        """For code tasks (codeopt-records): check the current train.py for correctness on fresh inputs and
        time it (one unit of budget)."""
        return service.run_benchmark(run_for(ctx, run_id))

    @mcp.tool(annotations=READ_ONLY)
    @refusals
    def get_experiment_history(
        ctx: Context,
        run_id: RunId = None,
        last: Annotated[int | None, Field(ge=1, le=1000, description="only the most recent N")] = None,
        offset: Annotated[int, Field(ge=0, le=1_000_000_000, description="skip this many")] = 0,
        order: Annotated[
            Literal["iteration", "metric"], Field(description="iteration order, or best first")
        ] = "iteration",
        status: Annotated[ExperimentStatus | None, Field(description="only this status")] = None,
    ) -> HistoryPage:
        """A page of recorded experiments (params, metrics, status, duration, note, error)."""
        return service.history(run_for(ctx, run_id), last, offset, order, status)
