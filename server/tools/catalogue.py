"""The tool catalogue as a host sends it to its model: on every turn, so every token in it is paid for
again and again (Claude Desktop lists it once, at start, and sends it with every message).

What the arguments models publish (titles, `anyOf [X, null]`, length caps, the same `run_id` words in a
dozen tools, every task's params side by side) serves validation, which the server does on every call
anyway. Listed to a model, each tool keeps its description and its arguments' names, types, choices and
words, each argument's words once in the catalogue; `run_id` is described in start_run's description;
`params` is an object whose keys, ranges and scales start_run's answer lists, once, rather than every
task's schema on every turn. A connection that keeps a session (initialize) and starts or names a run is
sent `notifications/tools/list_changed`, and lists from then on only the tools its run's kind of task
uses (the others stay callable). docs/hosts.md says which hosts list again.
"""

from typing import Any

from mcp.server import MCPServer
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.types import ListToolsResult

from autoresearch_mcp.contract.errors import ResearchError
from autoresearch_mcp.contract.focus import compact
from autoresearch_mcp.contract.tools import TOOLS, ToolName
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.tasks.base import Task
from autoresearch_mcp.server.tools.connection import RunResolver

PARAMS = {
    "type": "object",
    "description": "the task's params, as start_run's answer lists them",
}
# A tool argument's bounds guard the server (the call is refused, saying why, past one); a model never
# comes near them, and the task params keep theirs.
SANITY_BOUNDS = {"minimum", "maximum", "maxItems"}
# The defaults a model plans with; the others are what it would assume (the first page, the only
# seed), and a call that needs another value names it.
DEFAULTS_SHOWN = {"budget", "base"}
# An argument's words as a host's model reads them, every turn: shorter than the contract's (which the
# bundled agent reads, and its committed token counts depend on), or none where the name says it (None).
HOST_WORDS: dict[str, str | None] = {
    "task": None,
    "budget": "experiments it may record",
    "target": "converge at this metric",
    "seed": "given to train.py",
    "name": "a label for people",
    "reeval_seeds": "re-measure a would-be best on N more seeds",
    "from_run": 'a run to continue (or "latest"): its best re-measured as #1, one unit of budget',
    "llm": "the model proposing, recorded",
    "suggest": "a summary line with Optuna TPE's next params",
    "status": None,
    "text": None,
    "kind": None,
    "reason": None,
    "note": None,
    "base": "what params left out take",
    "remeasure": "time it again (costs budget); the best's samples pool",
    "last": "the N most recent",
    "offset": None,
    "order": "metric: best first",
    "search": "exact text, found once",
    "replace": "its replacement",
    "description": "what and why, one line",
    "source": "the whole new file",
    "edits": "applied in order",
    "code": "its whole new def (imports above it go to the top)",
    "version": "1 = the original",
    "job_id": None,
    "wait_seconds": None,
    "sql": None,
    "max_rows": None,
}
# The tools a task of one kind never uses: listed once a connection's run is of that kind.
UNUSED = {
    "params": {ToolName.RUN_BENCHMARK, ToolName.REPLACE_FUNCTION, ToolName.PROFILE_TRAIN_PY},
    "code": {ToolName.RUN_EXPERIMENT, ToolName.SUBMIT_TRAINING_JOB, ToolName.GET_JOB},
}


def listed_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A tool's input schema as a model reads it: `run_id` a bare string (start_run describes it),
    `params` an object (start_run's answer lists the task's, once)."""
    listed = compact(schema, schema.get("$defs", {}))
    listed.pop("title", None)
    properties = {name: _listed_argument(name, prop) for name, prop in listed.get("properties", {}).items()}
    listed["properties"] = properties
    if "run_id" in properties:
        properties["run_id"] = {"type": "string"}
    if "params" in properties:
        properties["params"] = dict(PARAMS)
    return listed


def _listed_argument(name: str, prop: dict[str, Any]) -> dict[str, Any]:
    listed = {key: value for key, value in prop.items() if key not in SANITY_BOUNDS}
    if name in HOST_WORDS:
        listed.pop("description", None)
        if HOST_WORDS[name] is not None:
            listed["description"] = HOST_WORDS[name]
    if "enum" in listed or "const" in listed:  # the choices say the type
        listed.pop("type", None)
    if name not in DEFAULTS_SHOWN:
        listed.pop("default", None)
    items = listed.get("items")
    if isinstance(items, dict):
        listed["items"] = {key: value for key, value in items.items() if key != "additionalProperties"}
        inner = listed["items"].get("properties")
        if isinstance(inner, dict):  # an edit's search and replace
            listed["items"]["properties"] = {
                key: _listed_argument(key, value) for key, value in inner.items()
            }
    return listed


def described_once(schemas: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The schemas with each argument's description given once: where a later tool takes the same
    argument in the same words (submit_training_job's params, note and base are run_experiment's),
    the model has read them already."""
    seen: set[tuple[str, str]] = set()
    for schema in schemas:
        for name, prop in schema.get("properties", {}).items():
            said = prop.get("description")
            if said is None:
                continue
            if (name, said) in seen:
                del prop["description"]
            seen.add((name, said))
    return schemas


def list_for_hosts(mcp: MCPServer, research: Research, resolver: RunResolver) -> None:
    """Answer tools/list with the catalogue a model reads (see the module's words)."""

    async def middleware(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        result = await call_next(ctx)
        if ctx.method != "tools/list" or result is None:
            return result
        listed = ListToolsResult.model_validate(result)
        task = _task_of(research, resolver, ctx)
        unused = set() if task is None else UNUSED[_kind(task)]
        kept = [tool for tool in listed.tools if tool.name not in unused or tool.name not in TOOLS]
        schemas = described_once([listed_schema(tool.input_schema) for tool in kept])
        tools = [
            tool.model_copy(update={"input_schema": schema})
            for tool, schema in zip(kept, schemas, strict=True)
        ]
        return listed.model_copy(update={"tools": tools})

    mcp.middleware.append(middleware)


def _kind(task: Task) -> str:
    return "params" if task.experiment_tool == ToolName.RUN_EXPERIMENT else "code"


def _task_of(research: Research, resolver: RunResolver, ctx: ServerRequestContext[Any, Any]) -> Task | None:
    run_id = resolver.remembered_on(ctx.session)
    if run_id is None:
        return None
    try:
        return research.tasks(research.runs.get_run(run_id).task)
    except ResearchError:  # a task no longer registered: the catalogue before a run
        return None
