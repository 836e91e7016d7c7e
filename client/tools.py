"""The agent's tool set: the tools its task's profile names, each as the contract's focus offers it to a
model (contract/focus.py: run_id and fixed arguments hidden, params as names and types).

A tool left with `params` alone takes the params at the top level, and the agent nests them under
`params` for the server: fewer tokens each way, and the shape small models write anyway."""

from typing import Any

from autoresearch_mcp.client.llm.base import ToolSpec
from autoresearch_mcp.contract.focus import focused_tool
from autoresearch_mcp.contract.models import TaskInfo


def agent_tools(mcp_tools: list[Any], task: TaskInfo) -> list[ToolSpec]:
    """The tools the task's profile names, as its model is offered them."""
    by_name = {tool.name: tool for tool in mcp_tools}
    specs = []
    for name in task.agent.tools:
        tool = by_name.get(name)
        if tool is None:
            continue
        description, schema = focused_tool(
            name, tool.input_schema, tool.description, task.agent, task.params_schema
        )
        properties = schema.get("properties", {})
        if set(properties) == {"params"}:
            flat = properties["params"]
            specs.append(ToolSpec(name=name, description=description, input_schema=flat, nest="params"))
            continue
        specs.append(ToolSpec(name=name, description=description, input_schema=schema))
    return specs


def server_arguments(spec: ToolSpec | None, arguments: dict[str, Any]) -> dict[str, Any]:
    """The arguments for the server's tool: a flat tool's under its `nest` (a reply that nested them
    itself is taken as it is)."""
    if spec is None or spec.nest is None:
        return arguments
    if set(arguments) == {spec.nest} and isinstance(arguments[spec.nest], dict):
        return arguments
    return {spec.nest: arguments}
