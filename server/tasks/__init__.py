"""The task registry. Built-in tasks register themselves; a plugin adds one with `register`."""

from collections.abc import Callable
from typing import Any

from autoresearch_mcp.server.errors import ResearchError
from autoresearch_mcp.server.tasks.base import Task

TaskFactory = Callable[[dict[str, Any]], Task]
_REGISTRY: dict[str, TaskFactory] = {}


def register(name: str, factory: TaskFactory) -> None:
    """Make a task available to start_run. The factory gets the server's task settings."""
    _REGISTRY[name] = factory


def unregister(name: str) -> None:
    _REGISTRY.pop(name, None)


def task_names() -> list[str]:
    _load_builtins()
    return sorted(_REGISTRY)


def make_task(name: str, settings: dict[str, Any]) -> Task:
    _load_builtins()
    factory = _REGISTRY.get(name)
    if factory is None:
        raise ResearchError(f"unknown task {name!r}; available tasks: {', '.join(task_names())}")
    return factory(settings)


def _load_builtins() -> None:
    # Imported lazily so that importing the registry does not pull in xgboost and friends.
    from autoresearch_mcp.server.tasks import hpo_covertype  # noqa: F401
