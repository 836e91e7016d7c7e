"""The task registry. Built-in tasks register themselves; a plugin adds one with `register`; task
folders come from the server's settings (`task_dirs`), so each server knows its own."""

import importlib
import os
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

from autoresearch_mcp.contract.env import ENV_TASK_PLUGINS
from autoresearch_mcp.contract.errors import ResearchError
from autoresearch_mcp.server.tasks.base import Task

TaskFactory = Callable[[dict[str, Any]], Task]
_REGISTRY: dict[str, TaskFactory] = {}
_loaded = False


def register(name: str, factory: TaskFactory) -> None:
    """Make a task available to start_run. The factory gets the server's task settings."""
    _REGISTRY[name] = factory


def unregister(name: str) -> None:
    _REGISTRY.pop(name, None)


def task_names(settings: dict[str, Any] | None = None) -> list[str]:
    _load_builtins()
    return sorted({*_REGISTRY, *_folders(settings)})


def make_task(name: str, settings: dict[str, Any]) -> Task:
    _load_builtins()
    factory = _REGISTRY.get(name) or _folders(settings).get(name)
    if factory is None:
        raise ResearchError(
            f"unknown task {name!r}; available tasks: {', '.join(task_names(settings))}", kind="unknown_task"
        )
    return factory(settings)


def _folders(settings: dict[str, Any] | None) -> dict[str, TaskFactory]:
    """The task folders the settings name, by task name (each folder's autoresearch.toml read here)."""
    paths = (settings or {}).get("task_dirs") or []
    if not paths:
        return {}
    from autoresearch_mcp.server.tasks.folder.task import folder_task_class

    found: dict[str, TaskFactory] = {}
    for path in paths:
        cls = folder_task_class(path)
        if cls.name in _REGISTRY or cls.name in found:
            raise ResearchError(
                f"task folder {path}: its name {cls.name!r} is already taken by another task; rename it "
                "in its autoresearch.toml",
                kind="bad_argument",
            )
        found[cls.name] = cls
    return found


def make_task_from(module: str, name: str, settings: dict[str, Any]) -> Task:
    """Import `module` (which registers `name`) and make that task, without importing every other
    task first: a job worker needs only the task its job runs (the built-ins pull in scikit-learn)."""
    importlib.import_module(module)
    factory = _REGISTRY.get(name)
    return factory(settings) if factory is not None else make_task(name, settings)


def _load_builtins() -> None:
    """Built-in tasks, then plugins: entry points in group `autoresearch_mcp.tasks`, and modules named
    in AUTORESEARCH_TASK_PLUGINS (comma-separated). Each plugin module calls `register` on import."""
    global _loaded
    if _loaded:
        return
    # Imported lazily so that importing the registry does not pull in xgboost and friends.
    from autoresearch_mcp.server.tasks.codeopt_records import task as _codeopt  # noqa: F401
    from autoresearch_mcp.server.tasks.hpo_covertype import task as _hpo  # noqa: F401

    for point in entry_points(group="autoresearch_mcp.tasks"):
        point.load()
    for module in filter(None, (m.strip() for m in os.environ.get(ENV_TASK_PLUGINS, "").split(","))):
        importlib.import_module(module)
    _loaded = True
