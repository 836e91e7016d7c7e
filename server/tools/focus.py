"""A server focused on one task (`serve --tools-for TASK`): its tools offered to an outside framework's
model the way our own agent offers them to its model, so that model gets the same focus.

A small model offered every tool, with the params of every task, reads thousands of tokens of tools it
will not use and calls the wrong ones; our agent offers one or two. Focused:

- tools/list answers only the tools of the task's agent profile, each shaped by the contract's focus
  (contract/focus.py: run_id and the profile's fixed arguments hidden, params as the task's names and
  types), exactly what our agent sends;
- a call of one of them gets the profile's fixed arguments filled in (run_experiment base="best"); an
  accepted edit of a task whose profile benchmarks each edit is benchmarked at once; and the text of an
  experiment's result is what our agent shows each turn: the result line, then the run's turn in the
  small profile's words (server/turn.py: the summary, the code in focus of a code task, the request).
  The structured result is unchanged;
- the other tools stay callable (the script that starts and finishes the run uses them), unlisted;
- the `autoresearch` prompt is the profile's system prompt, then the run's first turn (program.py).
"""

import dataclasses
from typing import Any

import anyio
from mcp.server import MCPServer
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.types import CallToolResult, ListToolsResult, TextContent

from autoresearch_mcp.contract.focus import focused_tool, nested, result_line, version_line
from autoresearch_mcp.contract.models import ArtifactInfo, ExperimentResult
from autoresearch_mcp.contract.tools import EXPERIMENT_TOOLS, TOOLS, ToolName
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.tasks.base import Task
from autoresearch_mcp.server.turn import render_turn


def focus_on(mcp: MCPServer, research: Research, task: Task) -> None:
    profile = task.agent_profile()
    params_schema = task.params_model.model_json_schema()
    offered = set(profile.tools)
    # The tools offered flat (params alone, at the top level): their calls are nested back here.
    flat = {
        name
        for name in offered
        if name in TOOLS
        and "params" in (schema := TOOLS[ToolName(name)].arguments.model_json_schema()).get("properties", {})
        and "params" not in focused_tool(name, schema, None, profile, params_schema)[1].get("properties", {})
    }

    def turn(run_id: str, line: str) -> str:
        """The result line, then the run's turn as our agent reads it (server/turn.py)."""
        return f"{line}\n{render_turn(research, run_id, 'small')}"

    def after(name: str, result: CallToolResult) -> CallToolResult:
        """On a worker thread: the result, with the text our agent would show its model after it."""
        data = result.structured_content
        if result.is_error or not data:
            return result
        if name in EXPERIMENT_TOOLS:
            done = ExperimentResult.model_validate(data)
            text = turn(done.experiment.run_id, result_line(done))
        elif name in (ToolName.MODIFY_TRAIN_PY, ToolName.REPLACE_FUNCTION) and profile.benchmark_after_edit:
            info = ArtifactInfo.model_validate(data)
            try:
                measured = result_line(research.experiments.run_benchmark(info.run_id))
            except Exception as exc:  # a refusal (no budget left) is what the model reads
                measured = str(exc)
            text = turn(info.run_id, f"{version_line(info)}; benchmarked: {measured}")
        else:
            return result
        return result.model_copy(update={"content": [TextContent(type="text", text=text)]})

    async def middleware(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        params = ctx.params or {}
        name = params.get("name")
        if ctx.method == "tools/call" and name in offered:
            fixed = profile.fixed_arguments.get(str(name), {})
            arguments = params.get("arguments") or {}
            arguments = {**(nested(arguments) if name in flat else arguments), **fixed}
            result = await call_next(dataclasses.replace(ctx, params={**params, "arguments": arguments}))
            if result is None:
                return result
            return await anyio.to_thread.run_sync(after, str(name), CallToolResult.model_validate(result))
        result = await call_next(ctx)
        if ctx.method == "tools/list" and result is not None:
            listed = ListToolsResult.model_validate(result)
            tools = []
            for tool in listed.tools:
                if tool.name in offered:
                    description, schema = focused_tool(
                        tool.name, tool.input_schema, tool.description, profile, params_schema
                    )
                    tools.append(tool.model_copy(update={"description": description, "input_schema": schema}))
            return listed.model_copy(update={"tools": tools})
        return result

    # Right after the notifier's, ahead of the guard that refuses flat params: a flat call of a tool
    # offered flat is nested here first.
    mcp.middleware.insert(1, middleware)
