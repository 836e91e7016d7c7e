"""Resources: autoresearch://runs, per run its summary, history and train.py; autoresearch://tasks."""

import functools
from collections.abc import Awaitable, Callable

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError

from autoresearch_mcp.contract.errors import ResearchError
from autoresearch_mcp.contract.models import RunList, TaskList
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.runs import HISTORY_PAGE
from autoresearch_mcp.server.tasks.registry import task_names

RUNS_URI = "autoresearch://runs"
RUN_URI = "autoresearch://runs/{run_id}"
SUMMARY_URI = "autoresearch://runs/{run_id}/summary"
HISTORY_URI = "autoresearch://runs/{run_id}/history"
TRAIN_PY_URI = "autoresearch://runs/{run_id}/train.py"
VERSION_URI = "autoresearch://runs/{run_id}/versions/{version}"
RUN_TEMPLATES = (RUN_URI, SUMMARY_URI, HISTORY_URI, TRAIN_PY_URI, VERSION_URI)


def _not_found(fn: Callable[..., str]) -> Callable[..., str]:
    @functools.wraps(fn)
    def wrapper(**params: str) -> str:
        try:
            return fn(**params)
        except ResearchError as exc:
            raise ResourceNotFoundError(str(exc)) from None

    return wrapper


def _on_the_loop(fn: Callable[..., str]) -> Callable[..., Awaitable[str]]:
    """A resource read on the event loop rather than a worker thread: for the few indexed reads that
    cost less than the hop to a thread (the run and its summary, read every turn)."""

    @functools.wraps(fn)
    async def read(**params: str) -> str:
        return _not_found(fn)(**params)

    return read


def register(mcp: MCPServer, research: Research) -> None:
    service = research.runs

    @mcp.resource(RUNS_URI, name="runs", mime_type="application/json")
    def runs_resource() -> str:
        """Every run with task, status, best and budget used."""
        return RunList(runs=service.list_runs()).model_dump_json()

    @mcp.resource(RUN_URI, name="run", mime_type="application/json")
    @_on_the_loop
    def run_resource(run_id: str) -> str:
        """One run with task, status, best and budget used (what autoresearch://runs lists for each)."""
        return service.get_run(run_id).model_dump_json()

    @mcp.resource(SUMMARY_URI, name="run-summary", mime_type="text/plain")
    @_on_the_loop
    def summary_resource(run_id: str) -> str:
        """The bounded summary the agent reads every turn; subscribe to hear when an experiment ends."""
        return service.summary(run_id)

    @mcp.resource(HISTORY_URI, name="run-history", mime_type="application/json")
    @_not_found
    def history_resource(run_id: str) -> str:
        """The run's latest experiments (a page, in iteration order, with the total): the whole
        history, page by page, is get_experiment_history's."""
        return service.history(run_id, HISTORY_PAGE, 0, "iteration", None).model_dump_json()

    @mcp.resource(TRAIN_PY_URI, name="run-train-py", mime_type="text/x-python")
    @_not_found
    def train_py_resource(run_id: str) -> str:
        """The current train.py."""
        return service.current_artifact(run_id).source

    @mcp.resource(VERSION_URI, name="run-version", mime_type="text/x-python")
    @_not_found
    def version_resource(run_id: str, version: str) -> str:
        """One version of train.py (1 = the original), e.g. the best's, to write back with `apply`."""
        if not version.isdigit():
            raise ResearchError(f"a version is a whole number from 1, not {version!r}")
        service.store.get_run(run_id)
        return service.store.artifacts.get(run_id, int(version)).source

    @mcp.resource("autoresearch://tasks", name="tasks", mime_type="application/json")
    def tasks_resource() -> str:
        """Every registered task: what it optimises, its kind, experiment tool and params schema."""
        return TaskList(
            tasks=[service.task(name).info() for name in task_names(research.settings.task_settings())]
        ).model_dump_json()

    @mcp.resource("autoresearch://tasks/{name}", name="task", mime_type="application/json")
    @_not_found
    def task_resource(name: str) -> str:
        """One task as an agent needs to know it (kind, tool, params schema, the scripted double's plan)."""
        return service.task(name).info().model_dump_json()
