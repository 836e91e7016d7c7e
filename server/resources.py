"""Resources: autoresearch://runs, per run its summary, turn, history and train.py; autoresearch://tasks.
Their URIs are the contract's (contract/tools.py, `Uri`)."""

import functools
from collections.abc import Awaitable, Callable

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError

from autoresearch_mcp.contract.arguments import HISTORY_PAGE
from autoresearch_mcp.contract.errors import ResearchError
from autoresearch_mcp.contract.models import RunList, TaskList
from autoresearch_mcp.contract.tools import Uri
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.summary import LAST_EXPERIMENTS, listed_last
from autoresearch_mcp.server.turn import PROFILES, REPLIES, render_turn


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
    runs, tasks = research.runs, research.tasks

    @mcp.resource(Uri.RUNS, name="runs", mime_type="application/json")
    def runs_resource() -> str:
        """Every run with task, status, best and budget used."""
        return RunList(runs=runs.list_runs()).model_dump_json()

    @mcp.resource(Uri.RUN, name="run", mime_type="application/json")
    @_on_the_loop
    def run_resource(run_id: str) -> str:
        """One run with task, status, best and budget used (what autoresearch://runs lists for each)."""
        return runs.get_run(run_id).model_dump_json()

    @mcp.resource(Uri.SUMMARY, name="run-summary", mime_type="text/plain")
    @_on_the_loop
    def summary_resource(run_id: str) -> str:
        """The bounded summary of the run, in facts; subscribe to hear when an experiment ends."""
        return runs.get_run_summary(run_id)

    @mcp.resource(Uri.SMALL_SUMMARY, name="run-summary-small", mime_type="text/plain")
    @_on_the_loop
    def small_summary_resource(run_id: str) -> str:
        """The summary as the bundled agent reads it every turn, with what helps a small model."""
        return runs.get_run_summary(run_id, "small")

    @mcp.resource(Uri.TURN, name="run-turn", mime_type="text/plain")
    @_not_found
    def turn_resource(
        run_id: str, profile: str = "", reply: str = "", shown: str = "", skip: str = "", last: str = ""
    ) -> str:
        """What a model reads before its next step: the summary, the code in focus (code tasks) and the
        request (server/turn.py). `profile`: neutral (facts, the default) or small; `reply`: tool, json
        or text; `shown`, `skip`: comma-separated function names held already, and set aside; `last`:
        how many recent experiments the summary lists (3 unless given: a batch's every result)."""
        words = profile or "neutral"
        if words not in PROFILES:
            raise ResearchError(f"profile is one of {', '.join(PROFILES)}, not {profile!r}")
        protocol = reply or "tool"
        if protocol not in REPLIES:
            raise ResearchError(f"reply is one of {', '.join(REPLIES)}, not {reply!r}")
        held, aside = (frozenset(n for n in names.split(",") if n) for names in (shown, skip))
        listed = listed_last(last) if last else LAST_EXPERIMENTS
        return render_turn(research, run_id, words, protocol, held, aside, listed)  # type: ignore[arg-type]

    @mcp.resource(Uri.HISTORY, name="run-history", mime_type="application/json")
    @_not_found
    def history_resource(run_id: str) -> str:
        """The run's latest experiments (a page, in iteration order, with the total): the whole
        history, page by page, is get_experiment_history's."""
        return research.experiments.get_experiment_history(run_id, last=HISTORY_PAGE).model_dump_json()

    @mcp.resource(Uri.TRAIN_PY, name="run-train-py", mime_type="text/x-python")
    @_not_found
    def train_py_resource(run_id: str) -> str:
        """The current train.py."""
        return research.train_py.get_current_train_py(run_id).source

    @mcp.resource(Uri.VERSION, name="run-version", mime_type="text/x-python")
    @_not_found
    def version_resource(run_id: str, version: str) -> str:
        """One version of train.py (1 = the original), e.g. the best's, to write back with `apply`."""
        if not version.isdigit():
            raise ResearchError(f"a version is a whole number from 1, not {version!r}")
        research.store.get_run(run_id)
        return research.store.artifacts.get(run_id, int(version)).source

    @mcp.resource(Uri.TASKS, name="tasks", mime_type="application/json")
    def tasks_resource() -> str:
        """Every registered task: what it optimises, its kind, experiment tool and params schema."""
        listed = TaskList(tasks=[tasks(name).info() for name in tasks.names()])
        return listed.model_dump_json(exclude={"tasks": {"__all__": {"agent"}}})

    @mcp.resource(Uri.TASK, name="task", mime_type="application/json")
    @_not_found
    def task_resource(name: str) -> str:
        """One task: what it optimises, its kind, experiment tool and params schema."""
        return tasks(name).info().model_dump_json(exclude={"agent"})

    @mcp.resource(Uri.TASK_AGENT, name="task-agent", mime_type="application/json")
    @_not_found
    def task_agent_resource(name: str) -> str:
        """How the bundled agent works on a task (its profile): read by that agent alone."""
        return tasks(name).info().agent.model_dump_json()

    @mcp.resource(Uri.SCRIPTED_PLAN, name="task-scripted-plan", mime_type="application/json")
    @_not_found
    def scripted_plan_resource(name: str) -> str:
        """What the scripted test double needs to play a task (its prior, or its chain of rewrites):
        read by the double alone."""
        return tasks(name).scripted_plan().model_dump_json()
