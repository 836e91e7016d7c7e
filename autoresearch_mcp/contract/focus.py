"""A tool as an agent offers it to a model, and an experiment's result as the model reads it: the same
for the bundled agent (client/tools.py, client/stateful.py) and for a server focused on one task
(`serve --tools-for TASK`), so an outside framework's model sees what ours does.

Tool definitions are re-sent on every call (cacheable, but still paid for), so only the tools the
task's profile names are offered, without what the model never sets (run_id and the profile's fixed
arguments: whoever calls fills them in; its dropped arguments), and with only the names and types of
the task's parameters.
"""

from typing import Any

from autoresearch_mcp.contract.errors import error_headline
from autoresearch_mcp.contract.models import AgentProfile, ArtifactInfo, ExperimentResult

# run_id: whoever calls fills it in; remeasure: a repeat on purpose is a host's choice, not a small
# model's (its profile never asks for one).
HIDDEN_ARGS = {"run_id", "remeasure"}
# Length caps stay enforced by the server; sent to the model they only cost tokens, and llama.cpp
# servers turn a maxLength of 2000 into a grammar too large to build (it crashes the server).
DROP_KEYS = {"title", "examples", "maxLength", "minLength"}


def first_sentence(text: str) -> str:
    text = " ".join((text or "").split())
    end = text.find(". ")
    return text if end < 0 else text[: end + 1]


def compact(schema: Any, defs: dict[str, Any]) -> Any:
    """Inline $refs, drop titles, turn `anyOf [X, null]` into X (optional args are simply not required)."""
    if isinstance(schema, list):
        return [compact(item, defs) for item in schema]
    if not isinstance(schema, dict):
        return schema
    if "$ref" in schema:
        return compact(defs[schema["$ref"].rsplit("/", 1)[-1]], defs)
    if "anyOf" in schema:
        options = [o for o in schema["anyOf"] if o.get("type") != "null"]
        if len(options) == 1:
            merged = {**options[0], **{k: v for k, v in schema.items() if k not in ("anyOf", "default")}}
            return compact(merged, defs)
    out = {}
    for key, value in schema.items():
        if key in DROP_KEYS or key == "$defs" or (key == "default" and value is None):
            continue
        out[key] = compact(value, defs)
    return out


def params_for_model(schema: dict[str, Any]) -> dict[str, Any]:
    """The task's params as names and types only: the ranges are in the instructions, and a grammar
    built from the schema enforces types, not bounds."""
    properties = {
        name: {"type": prop["type"]} if "type" in prop else {}
        for name, prop in schema.get("properties", {}).items()
    }
    return {"type": "object", "properties": properties, "additionalProperties": False}


def hidden_arguments(name: str, profile: AgentProfile) -> set[str]:
    """The arguments of tool `name` the model is not offered: the caller fills them in, or not at all."""
    return (
        HIDDEN_ARGS
        | set(profile.fixed_arguments.get(name, {}))
        | set(profile.dropped_arguments.get(name, []))
    )


def focused_tool(
    name: str,
    input_schema: dict[str, Any],
    description: str | None,
    profile: AgentProfile,
    params: dict[str, Any],
) -> tuple[str, dict[str, Any]]:
    """(description, input schema) of tool `name` as offered to the model working on a task whose
    profile is `profile` and params schema `params`. Applied to its own output it changes nothing."""
    described = profile.tool_descriptions.get(name) or first_sentence(description or name)
    if input_schema == params_for_model(params):
        return described, input_schema  # already focused, and flat
    hidden = hidden_arguments(name, profile)
    schema = dict(input_schema)
    defs = schema.pop("$defs", {})
    properties = {k: v for k, v in schema.get("properties", {}).items() if k not in hidden}
    if "params" in properties:
        properties["params"] = params_for_model(params)
    focused = compact({**schema, "properties": properties}, defs)
    focused["required"] = [r for r in schema.get("required", []) if r not in hidden]
    flat = flat_params(focused)
    return described, focused if flat is None else flat


def flat_params(schema: dict[str, Any]) -> dict[str, Any] | None:
    """A focused tool left with `params` alone takes the params at the top level, and whoever calls the
    server nests them under `params` (`nested`): fewer tokens each way, and the shape small models write
    anyway. Its flat schema, or None."""
    properties = schema.get("properties", {})
    return properties["params"] if set(properties) == {"params"} else None


def nested(arguments: dict[str, Any]) -> dict[str, Any]:
    """A flat tool's arguments as the server takes them (a reply that nested them itself, as it is)."""
    if set(arguments) == {"params"} and isinstance(arguments["params"], dict):
        return arguments
    return {"params": arguments}


def result_line(result: ExperimentResult) -> str:
    """`#3 ok 0.7412 NEW BEST; best 0.7412 (#3); budget left 12`: the experiment, the best, the budget
    (the full record stays on the server)."""
    exp, best = result.experiment, result.best
    metric = f" {exp.metric:.4f}" if exp.metric is not None else ""
    line = f"#{exp.iteration} {exp.status}{metric}" + (" NEW BEST" if result.is_new_best else "")
    if exp.status != "ok" and exp.error_tail and exp.error_tail.strip():
        line += f": {error_headline(exp.error_tail)[:200]}"
    if best:
        line += f"; best {best.metric:.4f} (#{best.iteration})"
    return line + f"; budget left {result.budget_left}"


def version_line(info: ArtifactInfo) -> str:
    """What an accepted edit or revert made of train.py."""
    return f"train.py is now v{info.version} ({info.lines} lines)"
