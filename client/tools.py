"""The agent's tool set: the tools its task's profile names, each as the contract's focus offers it to a
model (contract/focus.py: run_id and fixed arguments hidden, params as names and types, a tool left with
`params` alone flat: the agent nests its arguments for the server)."""

from typing import Any

from autoresearch_mcp.client.llm.base import ToolSpec
from autoresearch_mcp.contract.focus import focused_tool, nested
from autoresearch_mcp.contract.models import TaskInfo
from autoresearch_mcp.contract.tools import TOOLS


def agent_tools(mcp_tools: list[Any], task: TaskInfo) -> list[ToolSpec]:
    """The tools the task's profile names, as its model is offered them."""
    by_name = {tool.name: tool for tool in mcp_tools}
    specs = []
    for name in task.agent.tools:
        tool = by_name.get(name)
        if tool is None:
            continue
        description, schema = focused_tool(
            name, contract_schema(name, tool.input_schema), tool.description, task.agent, task.params_schema
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


def contract_schema(name: str, listed: dict[str, Any]) -> dict[str, Any]:
    """Tool `name`'s arguments in the contract's own words, which the small-model profile was written
    for: a host's listing shortens them (server/tools/catalogue.py). A tool outside the contract: as
    listed."""
    tool = TOOLS.get(name)  # type: ignore[call-overload]
    if tool is None:
        return listed
    return {"type": "object", **tool.arguments.model_json_schema()}


def server_arguments(spec: ToolSpec | None, arguments: dict[str, Any]) -> dict[str, Any]:
    """The arguments for the server's tool: a flat tool's nested under `params`."""
    if spec is None or spec.nest is None:
        return arguments
    return nested(arguments)
