"""The agent's tool set: the tools its task's profile names, each as the contract's focus offers it to a
model (contract/focus.py: run_id and fixed arguments hidden, params as names and types, a tool left with
`params` alone flat: the agent nests its arguments for the server)."""

from typing import Any

from autoresearch_mcp.client.llm.base import ToolSpec
from autoresearch_mcp.contract.focus import focused_tool, nested
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
        # Flattened here: the server's tool takes them nested (a focused server nests them itself).
        flat = "params" in tool.input_schema.get("properties", {}) and "params" not in schema.get(
            "properties", {}
        )
        spec = ToolSpec(
            name=name, description=description, input_schema=schema, nest="params" if flat else None
        )
        specs.append(spec)
    return specs


def server_arguments(spec: ToolSpec | None, arguments: dict[str, Any]) -> dict[str, Any]:
    """The arguments for the server's tool: a flat tool's nested under `params`."""
    if spec is None or spec.nest is None:
        return arguments
    return nested(arguments)
