"""The agent's tool set: a small subset of the server's MCP tools, compactly described.

Tool definitions are re-sent on every call (cacheable, but still paid for), so the agent offers only
the tools its task's profile names, strips what the model never sets (run_id and the profile's fixed
arguments: the agent fills them in; its dropped arguments), and keeps only the names and types of the
task's parameters. A tool left with `params` alone takes the params at the top level (the agent nests
them under `params` for the server): fewer tokens each way, and the shape small models write anyway.
"""

from typing import Any

from autoresearch_mcp.client.llm.base import ToolSpec
from autoresearch_mcp.contract.models import TaskInfo

HIDDEN_ARGS = {"run_id"}
# Length caps stay enforced by the server; sent to the model they only cost tokens, and llama.cpp
# servers turn a maxLength of 2000 into a grammar too large to build (it crashes the server).
DROP_KEYS = {"title", "examples", "maxLength", "minLength"}


def _first_sentence(text: str) -> str:
    text = " ".join((text or "").split())
    end = text.find(". ")
    return text if end < 0 else text[: end + 1]


def _compact(schema: Any, defs: dict[str, Any]) -> Any:
    """Inline $refs, drop titles, turn `anyOf [X, null]` into X (optional args are simply not required)."""
    if isinstance(schema, list):
        return [_compact(item, defs) for item in schema]
    if not isinstance(schema, dict):
        return schema
    if "$ref" in schema:
        return _compact(defs[schema["$ref"].rsplit("/", 1)[-1]], defs)
    if "anyOf" in schema:
        options = [o for o in schema["anyOf"] if o.get("type") != "null"]
        if len(options) == 1:
            merged = {**options[0], **{k: v for k, v in schema.items() if k not in ("anyOf", "default")}}
            return _compact(merged, defs)
    out = {}
    for key, value in schema.items():
        if key in DROP_KEYS or key == "$defs" or (key == "default" and value is None):
            continue
        out[key] = _compact(value, defs)
    return out


def params_for_model(schema: dict[str, Any]) -> dict[str, Any]:
    """The task's params as names and types only: the ranges are in the system prompt, and a grammar
    built from the schema enforces types, not bounds."""
    properties = {
        name: {"type": prop["type"]} if "type" in prop else {}
        for name, prop in schema.get("properties", {}).items()
    }
    return {"type": "object", "properties": properties, "additionalProperties": False}


def agent_tools(mcp_tools: list[Any], task: TaskInfo) -> list[ToolSpec]:
    """The tools the task's profile names, with `params` narrowed to the task's own names and types,
    without the arguments the agent fills in itself or does not offer."""
    profile = task.agent
    specs = []
    by_name = {tool.name: tool for tool in mcp_tools}
    for name in profile.tools:
        tool = by_name.get(name)
        if tool is None:
            continue
        hidden = (
            HIDDEN_ARGS
            | set(profile.fixed_arguments.get(name, {}))
            | set(profile.dropped_arguments.get(name, []))
        )
        schema = dict(tool.input_schema)
        defs = schema.pop("$defs", {})
        properties = {k: v for k, v in schema.get("properties", {}).items() if k not in hidden}
        if "params" in properties:
            properties["params"] = params_for_model(task.params_schema)
        description = profile.tool_descriptions.get(name) or _first_sentence(tool.description or name)
        if set(properties) == {"params"}:
            flat = params_for_model(task.params_schema)
            specs.append(ToolSpec(name=name, description=description, input_schema=flat, nest="params"))
            continue
        compact = _compact({**schema, "properties": properties}, defs)
        compact["required"] = [r for r in schema.get("required", []) if r not in hidden]
        specs.append(ToolSpec(name=name, description=description, input_schema=compact))
    return specs


def server_arguments(spec: ToolSpec | None, arguments: dict[str, Any]) -> dict[str, Any]:
    """The arguments for the server's tool: a flat tool's under its `nest` (a reply that nested them
    itself is taken as it is)."""
    if spec is None or spec.nest is None:
        return arguments
    if set(arguments) == {spec.nest} and isinstance(arguments[spec.nest], dict):
        return arguments
    return {spec.nest: arguments}
