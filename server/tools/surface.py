"""The tools, registered from the contract's table (contract/tools.py): each is the function named like
it in the module of its subject (runs.py, experiments.py, train_py.py, jobs.py, query.py).

A tool's function declares what it needs by type, and gets it here: the `Research`, its typed
arguments, the `Run` the call means (resolved once, from `run_id` or the connection: connection.py), a
`Progress` to tell the caller where it stands. Its input schema is its arguments model, with what only
this server knows filled in: the params schema of each registered task, the task names, the task
lists and views of the descriptions. A refusal of the run logic becomes an error result carrying its
kind (calls.py).
"""

import copy
import dataclasses
import inspect
import json
import typing
from collections.abc import Callable
from typing import Annotated, Any

import anyio
from mcp.server import MCPServer
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field, WithJsonSchema
from pydantic_core import PydanticUndefined

from autoresearch_mcp.contract.arguments import RunExperimentArgs
from autoresearch_mcp.contract.errors import ResearchError
from autoresearch_mcp.contract.models import (
    ArtifactInfo,
    ExperimentResult,
    HistoryPage,
    JobInfo,
    Run,
    StartedRun,
)
from autoresearch_mcp.contract.tools import TOOLS, Tool, ToolName
from autoresearch_mcp.server.answers import Reading, plain_text
from autoresearch_mcp.server.events import Progress
from autoresearch_mcp.server.query import view_names
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.tools import experiments, jobs, query, runs, train_py
from autoresearch_mcp.server.tools.calls import how_it_runs, refusal_result, with_progress
from autoresearch_mcp.server.tools.catalogue import list_for_hosts
from autoresearch_mcp.server.tools.connection import RunResolver

SUBJECTS = {"runs": runs, "experiments": experiments, "train_py": train_py, "jobs": jobs, "query": query}


def function_of(tool: Tool) -> Callable[..., BaseModel]:
    """The function that is the tool: named like it, in the module of its subject."""
    fn: Callable[..., BaseModel] = getattr(SUBJECTS[tool.subject], tool.name)
    return fn


def register_tools(mcp: MCPServer, research: Research, resolver: RunResolver) -> None:
    overrides = schema_overrides(research)
    filled = descriptions(research)
    for tool in TOOLS.values():
        handler = _handler(tool, function_of(tool), research, resolver)
        handler.__signature__ = _signature(tool, overrides)  # type: ignore[attr-defined]
        mcp.add_tool(
            handler,
            name=tool.name,
            description=filled[tool.name],
            annotations=ToolAnnotations(**dataclasses.asdict(tool.annotations)),
        )
    guard_flat_params(mcp)
    list_for_hosts(mcp, research, resolver)


def schema_overrides(research: Research) -> dict[str, tuple[Any, ...]]:
    """Per argument, the schema only this server knows: each task's params model as one variant of
    `params` (validated again, per task, inside), the registered task names."""
    variants = []
    for name in research.tasks.names():
        schema = research.tasks(name).params_model.model_json_schema()
        schema["title"] = f"{name} params"
        variants.append(schema)
    params = {"anyOf": variants, "description": RunExperimentArgs.model_fields["params"].description}
    return {
        "params": (WithJsonSchema(params),),
        "task": (Field(json_schema_extra={"enum": research.tasks.names()}),),
    }


def descriptions(research: Research) -> dict[ToolName, str]:
    tasks = research.tasks
    names = {
        "params_tasks": ", ".join(tasks.evaluated_by(ToolName.RUN_EXPERIMENT)) or "none registered",
        "code_tasks": ", ".join(tasks.evaluated_by(ToolName.RUN_BENCHMARK)) or "none registered",
        "views": view_names(),
    }
    return {tool.name: tool.description.format(**names) for tool in TOOLS.values()}


def _signature(tool: Tool, overrides: dict[str, tuple[Any, ...]]) -> inspect.Signature:
    """The handler's signature, from which the SDK builds the input schema: the arguments model's
    fields in order, each with its type, constraints, description and default."""
    parameters = [inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=Context)]
    for name, field in tool.arguments.model_fields.items():
        info = copy.copy(field)  # the default travels as the parameter's, not twice
        info.default = PydanticUndefined
        info._attributes_set = {k: v for k, v in info._attributes_set.items() if k != "default"}
        default = inspect.Parameter.empty if field.is_required() else field.default
        annotation = Annotated[field.annotation, info, *overrides.get(name, ())]  # type: ignore[valid-type]
        parameters.append(
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)
        )
    return inspect.Signature(parameters, return_annotation=tool.result)


def _needs(tool: Tool, fn: Callable[..., BaseModel]) -> dict[str, str]:
    """What each parameter of the tool's function asks for, by its type."""
    hints = typing.get_type_hints(fn)
    needs = {}
    for name in inspect.signature(fn).parameters:
        hint = hints.get(name)
        if hint is Research:
            needs[name] = "research"
        elif hint is Run and tool.takes_run:
            needs[name] = "run"
        elif hint is tool.arguments:
            needs[name] = "args"
        elif hint == Progress:
            needs[name] = "progress"
        else:
            raise TypeError(f"{tool.name}: cannot give its parameter {name}: {hint}")
    return needs


def _handler(
    tool: Tool, fn: Callable[..., BaseModel], research: Research, resolver: RunResolver
) -> Callable[..., Any]:
    needs, (runs, label) = _needs(tool, fn), how_it_runs(fn)

    async def handler(ctx: Context, **arguments: Any) -> BaseModel | CallToolResult:
        args = tool.arguments.model_validate(arguments)
        before = resolver.remembered_on(ctx.session)

        def progress(done: float, total: float | None, message: str) -> None:
            anyio.from_thread.run(ctx.report_progress, done, total, message)

        def call() -> BaseModel:
            given = {"research": research, "args": args, "progress": progress}
            if "run" in needs.values():
                given["run"] = resolver(ctx, getattr(args, "run_id", None))
            return fn(**{name: given[need] for name, need in needs.items()})

        try:
            if runs == "loop":
                result = call()
            elif runs == "heartbeat":
                result = await with_progress(ctx, label, call)
            else:
                result = await anyio.to_thread.run_sync(call)
        except ResearchError as exc:
            return refusal_result(exc)
        if isinstance(result, StartedRun):  # this connection's run from now on
            resolver.remember(ctx, result.run_id)
        await _tell_if_listed_tools_changed(ctx, resolver, before)
        return answer(research, result)

    handler.__name__ = handler.__qualname__ = tool.name
    return handler


def answer(research: Research, result: BaseModel) -> CallToolResult:
    """The result as the structured content programs read, and the compact text a model reads
    (answers.py). train.py's source goes once, as the text."""
    text = plain_text(result, _reading(research, result))
    if isinstance(result, ArtifactInfo) and result.source is not None:
        result = result.model_copy(update={"source": None})
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=result.model_dump(mode="json", by_alias=True),
    )


def _reading(research: Research, result: BaseModel) -> Reading:
    run_id = _run_id_of(result)
    if run_id is None:
        return Reading()
    run = research.store.get_run(run_id)
    try:
        task = research.tasks(run.task)
    except ResearchError:  # a stored run of a folder this server was not given: still readable
        return Reading(metric=run.metric_name)
    has_params = task.experiment_tool == ToolName.RUN_EXPERIMENT
    return Reading(
        metric=run.metric_name,
        defaults=task.params_model().model_dump(),
        params_help=task.params_help() if has_params and isinstance(result, StartedRun) else "",
        files=task.editable(),
    )


def _run_id_of(result: BaseModel) -> str | None:
    if isinstance(result, ExperimentResult):
        return result.experiment.run_id
    if isinstance(result, JobInfo):
        return result.job.run_id
    if isinstance(result, HistoryPage):
        return result.experiments[0].run_id if result.experiments else None
    found = getattr(result, "run_id", None)
    return found if isinstance(found, str) else None


async def _tell_if_listed_tools_changed(ctx: Context, resolver: RunResolver, before: str | None) -> None:
    """A connection whose run changed lists other tools and params now (catalogue.py): say so."""
    after = resolver.remembered_on(ctx.session)
    if after is not None and after != before:
        await ctx.session.send_tool_list_changed()


# -- params sent at the top level ----------------------------------------------------------------
PARAMS_TOOLS = {tool.name: tool for tool in TOOLS.values() if "params" in tool.arguments.model_fields}


def flat_params_refusal(name: str, arguments: dict[str, Any]) -> CallToolResult | None:
    """A call that sends the task parameters at the top level ({"n_estimators": 50}) instead of inside
    `params`: the SDK would drop the unknown keys and answer with a bare "Field required" dump."""
    tool = PARAMS_TOOLS.get(name)  # type: ignore[call-overload]
    if tool is None or "params" in arguments:
        return None
    flat = {key: value for key, value in arguments.items() if key not in tool.arguments.model_fields}
    example = json.dumps({"params": flat or {"name": "value"}})[:300]
    what = f"got {', '.join(sorted(flat))} at the top level" if flat else "no params were given"
    return refusal_result(
        ResearchError(
            f"{name} takes the task parameters inside one `params` object ({what}); call it again as {example}",
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
